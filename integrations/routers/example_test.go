package routers_test

import (
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/go-chi/chi/v5"
	"github.com/gorilla/mux"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/store/memstore"
)

// perUser is middleware allowing 2 requests a minute per user, the user
// being the path parameter that id reads.
func perUser(id func(*http.Request) string) func(http.Handler) http.Handler {
	store, err := memstore.New()
	if err != nil {
		log.Fatal(err)
	}
	limiter, err := tokenbucket.New(store)
	if err != nil {
		log.Fatal(err)
	}
	mw, err := httplimit.Middleware([]httplimit.Policy{{
		Name:    "per-user",
		Limiter: limiter,
		Limit:   sluice.PerMinute(2),
		Key: func(r *http.Request) (string, error) {
			if v := id(r); v != "" {
				return v, nil
			}
			return "", errors.New("no user id in the path")
		},
	}})
	if err != nil {
		log.Fatal(err)
	}
	return mw
}

// perClient is middleware allowing 2 requests a minute per client address.
func perClient() func(http.Handler) http.Handler {
	store, err := memstore.New()
	if err != nil {
		log.Fatal(err)
	}
	limiter, err := tokenbucket.New(store)
	if err != nil {
		log.Fatal(err)
	}
	mw, err := httplimit.Middleware([]httplimit.Policy{
		{Name: "per-client", Limiter: limiter, Limit: sluice.PerMinute(2)},
	})
	if err != nil {
		log.Fatal(err)
	}
	return mw
}

func hello(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "hello") }

// printStatuses sends a GET for each path to h and prints the status codes.
func printStatuses(h http.Handler, paths ...string) {
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, path := range paths {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			log.Fatal(err)
		}
		_ = resp.Body.Close()
		fmt.Println(path, resp.StatusCode)
	}
}

// chi: a limit per user on one route, keyed by its {id} parameter, which
// chi has set when route-level middleware (r.With) runs. /hello is not
// limited.
func Example_chi() {
	r := chi.NewRouter()
	r.With(perUser(func(r *http.Request) string { return chi.URLParam(r, "id") })).Get("/users/{id}", hello)
	r.Get("/hello", hello)

	printStatuses(r, "/users/1", "/users/1", "/users/1", "/users/2", "/hello", "/hello", "/hello")
	// Output:
	// /users/1 200
	// /users/1 200
	// /users/1 429
	// /users/2 200
	// /hello 200
	// /hello 200
	// /hello 200
}

// gorilla/mux: a limit per client on every matched route with r.Use. A
// path no route matches is answered 404 without being counted.
func Example_gorillaMux() {
	r := mux.NewRouter()
	r.Use(mux.MiddlewareFunc(perClient()))
	r.HandleFunc("/hello", hello).Methods(http.MethodGet)

	printStatuses(r, "/nope", "/hello", "/hello", "/hello", "/nope")
	// Output:
	// /nope 404
	// /hello 200
	// /hello 200
	// /hello 429
	// /nope 404
}

// net/http ServeMux: a limit per client on the whole mux. The middleware
// runs before the mux routes, so a path no pattern matches is counted, and
// limited, too.
func Example_serveMux() {
	m := http.NewServeMux()
	m.HandleFunc("GET /hello", hello)

	printStatuses(perClient()(m), "/nope", "/hello", "/hello", "/nope")
	// Output:
	// /nope 404
	// /hello 200
	// /hello 429
	// /nope 429
}
