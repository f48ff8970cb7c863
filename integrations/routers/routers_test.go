package routers_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/gorilla/mux"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/store/memstore"
)

// burst is the limit of every test: 3 requests a minute, all at once, so
// no token comes back during a test.
const burst = 3

// newMiddleware builds the middleware of one policy on a fresh in-process
// store and token bucket. A nil key is the default (the client address).
func newMiddleware(t *testing.T, name string, key httplimit.KeyFunc) func(http.Handler) http.Handler {
	t.Helper()
	mem, err := memstore.New()
	require.NoError(t, err)
	tb, err := tokenbucket.New(mem)
	require.NoError(t, err)
	mw, err := httplimit.Middleware([]httplimit.Policy{
		{Name: name, Limiter: tb, Limit: sluice.PerMinute(burst), Key: key},
	})
	require.NoError(t, err)
	return mw
}

// byParam keys a request by a path parameter read by param, and fails
// (400) when it is empty rather than putting every request in one bucket.
func byParam(param func(*http.Request) string) httplimit.KeyFunc {
	return func(r *http.Request) (string, error) {
		if id := param(r); id != "" {
			return id, nil
		}
		return "", errors.New("no id in the path")
	}
}

func chiID(r *http.Request) string     { return chi.URLParam(r, "id") }
func gorillaID(r *http.Request) string { return mux.Vars(r)["id"] }
func serveMuxID(r *http.Request) string {
	return r.PathValue("id")
}

func ok(w http.ResponseWriter, _ *http.Request)      { w.WriteHeader(http.StatusOK) }
func created(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) }

func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// do sends one request and returns its response, body closed.
func do(t *testing.T, srv *httptest.Server, method, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, nil)
	require.NoError(t, err)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return resp
}

// requireLimited checks that the middleware answered: the RateLimit fields
// are there.
func requireLimited(t *testing.T, resp *http.Response) {
	t.Helper()
	require.NotEmpty(t, resp.Header.Get("RateLimit"), "RateLimit header")
	require.NotEmpty(t, resp.Header.Get("RateLimit-Policy"), "RateLimit-Policy header")
}

// requireNotLimited checks that no middleware saw the request.
func requireNotLimited(t *testing.T, resp *http.Response) {
	t.Helper()
	require.Empty(t, resp.Header.Values("RateLimit"), "RateLimit header")
	require.Empty(t, resp.Header.Values("RateLimit-Policy"), "RateLimit-Policy header")
}

// requireDenied checks a 429 with a Retry-After of at least a second and
// the RateLimit fields.
func requireDenied(t *testing.T, resp *http.Response) {
	t.Helper()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	retry, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q", resp.Header.Get("Retry-After"))
	require.GreaterOrEqual(t, retry, 1)
	requireLimited(t, resp)
}

// requireBurstThenDenied sends burst requests that must answer want with
// the RateLimit fields, then one that must be denied.
func requireBurstThenDenied(t *testing.T, srv *httptest.Server, method, path string, want int) {
	t.Helper()
	for i := range burst {
		resp := do(t, srv, method, path)
		require.Equal(t, want, resp.StatusCode, "%s %s, request %d of the burst", method, path, i+1)
		requireLimited(t, resp)
	}
	requireDenied(t, do(t, srv, method, path))
}

// requireUnlimited sends more than a burst of requests that must all
// answer want without any RateLimit field.
func requireUnlimited(t *testing.T, srv *httptest.Server, method, path string, want int) {
	t.Helper()
	for range 2 * burst {
		resp := do(t, srv, method, path)
		require.Equal(t, want, resp.StatusCode, "%s %s", method, path)
		requireNotLimited(t, resp)
	}
}

// requireSeparateLimits checks that /users/1 and /users/2 have a burst
// each.
func requireSeparateLimits(t *testing.T, srv *httptest.Server) {
	t.Helper()
	requireBurstThenDenied(t, srv, http.MethodGet, "/users/1", http.StatusOK)
	requireBurstThenDenied(t, srv, http.MethodGet, "/users/2", http.StatusOK)
	requireDenied(t, do(t, srv, http.MethodGet, "/users/1"))
}

// requireNoParam checks that the key function found no parameter: the
// middleware answers 400 before the handler.
func requireNoParam(t *testing.T, srv *httptest.Server) {
	t.Helper()
	for _, path := range []string{"/users/1", "/users/2"} {
		require.Equal(t, http.StatusBadRequest, do(t, srv, http.MethodGet, path).StatusCode, path)
	}
}

// requireMissesCounted checks that a 404 and a 405 each took a token from
// the client's bucket, then that once it is empty even unknown paths answer
// 429. The router serves GET /hello only.
func requireMissesCounted(t *testing.T, srv *httptest.Server) {
	t.Helper()
	notFound := do(t, srv, http.MethodGet, "/nope")
	require.Equal(t, http.StatusNotFound, notFound.StatusCode)
	requireLimited(t, notFound)
	notAllowed := do(t, srv, http.MethodDelete, "/hello")
	require.Equal(t, http.StatusMethodNotAllowed, notAllowed.StatusCode)
	requireLimited(t, notAllowed)
	hello := do(t, srv, http.MethodGet, "/hello")
	require.Equal(t, http.StatusOK, hello.StatusCode, "the burst's last token")
	requireLimited(t, hello)
	requireDenied(t, do(t, srv, http.MethodGet, "/hello"))
	requireDenied(t, do(t, srv, http.MethodGet, "/nope"))
	requireDenied(t, do(t, srv, http.MethodDelete, "/hello"))
}

// --- chi ---

func TestChiServiceWide(t *testing.T) {
	r := chi.NewRouter()
	r.Use(newMiddleware(t, "per-client", nil))
	r.Get("/hello", ok)
	r.Post("/orders", created)
	srv := serve(t, r)

	requireBurstThenDenied(t, srv, http.MethodGet, "/hello", http.StatusOK)
	requireDenied(t, do(t, srv, http.MethodPost, "/orders")) // one bucket for the service
}

func TestChiPerRoute(t *testing.T) {
	t.Run("With", func(t *testing.T) {
		r := chi.NewRouter()
		r.With(newMiddleware(t, "orders", nil)).Post("/orders", created)
		r.Get("/hello", ok)
		srv := serve(t, r)

		requireBurstThenDenied(t, srv, http.MethodPost, "/orders", http.StatusCreated)
		requireUnlimited(t, srv, http.MethodGet, "/hello", http.StatusOK)
	})
	t.Run("Group", func(t *testing.T) {
		r := chi.NewRouter()
		r.Group(func(r chi.Router) {
			r.Use(newMiddleware(t, "orders", nil))
			r.Post("/orders", created)
		})
		r.Get("/hello", ok)
		srv := serve(t, r)

		requireBurstThenDenied(t, srv, http.MethodPost, "/orders", http.StatusCreated)
		requireUnlimited(t, srv, http.MethodGet, "/hello", http.StatusOK)
	})
}

func TestChiPathParam(t *testing.T) {
	t.Run("With", func(t *testing.T) {
		r := chi.NewRouter()
		r.With(newMiddleware(t, "per-user", byParam(chiID))).Get("/users/{id}", ok)
		requireSeparateLimits(t, serve(t, r))
	})
	t.Run("Group", func(t *testing.T) {
		r := chi.NewRouter()
		r.Group(func(r chi.Router) {
			r.Use(newMiddleware(t, "per-user", byParam(chiID)))
			r.Get("/users/{id}", ok)
		})
		requireSeparateLimits(t, serve(t, r))
	})
	t.Run("root Use sees no parameter", func(t *testing.T) {
		r := chi.NewRouter()
		r.Use(newMiddleware(t, "per-user", byParam(chiID)))
		r.Get("/users/{id}", ok)
		requireNoParam(t, serve(t, r))
	})
}

func TestChiServiceWideCountsNotFoundAndMethodNotAllowed(t *testing.T) {
	r := chi.NewRouter()
	r.Use(newMiddleware(t, "per-client", nil))
	r.Get("/hello", ok)
	requireMissesCounted(t, serve(t, r))
}

// --- gorilla/mux ---

func TestGorillaServiceWide(t *testing.T) {
	r := mux.NewRouter()
	r.Use(mux.MiddlewareFunc(newMiddleware(t, "per-client", nil)))
	r.HandleFunc("/hello", ok).Methods(http.MethodGet)
	r.HandleFunc("/orders", created).Methods(http.MethodPost)
	srv := serve(t, r)

	requireBurstThenDenied(t, srv, http.MethodGet, "/hello", http.StatusOK)
	requireDenied(t, do(t, srv, http.MethodPost, "/orders"))
}

func TestGorillaPerRoute(t *testing.T) {
	t.Run("route", func(t *testing.T) {
		r := mux.NewRouter()
		mw := newMiddleware(t, "orders", nil)
		r.Handle("/orders", mw(http.HandlerFunc(created))).Methods(http.MethodPost)
		r.HandleFunc("/hello", ok).Methods(http.MethodGet)
		srv := serve(t, r)

		requireBurstThenDenied(t, srv, http.MethodPost, "/orders", http.StatusCreated)
		requireUnlimited(t, srv, http.MethodGet, "/hello", http.StatusOK)
	})
	t.Run("subrouter", func(t *testing.T) {
		r := mux.NewRouter()
		api := r.PathPrefix("/api").Subrouter()
		api.Use(mux.MiddlewareFunc(newMiddleware(t, "api", nil)))
		api.HandleFunc("/orders", created).Methods(http.MethodPost)
		r.HandleFunc("/hello", ok).Methods(http.MethodGet)
		srv := serve(t, r)

		requireBurstThenDenied(t, srv, http.MethodPost, "/api/orders", http.StatusCreated)
		requireUnlimited(t, srv, http.MethodGet, "/hello", http.StatusOK)
	})
}

func TestGorillaPathParam(t *testing.T) {
	t.Run("Use", func(t *testing.T) {
		r := mux.NewRouter()
		r.Use(mux.MiddlewareFunc(newMiddleware(t, "per-user", byParam(gorillaID))))
		r.HandleFunc("/users/{id}", ok).Methods(http.MethodGet)
		requireSeparateLimits(t, serve(t, r))
	})
	t.Run("route", func(t *testing.T) {
		r := mux.NewRouter()
		mw := newMiddleware(t, "per-user", byParam(gorillaID))
		r.Handle("/users/{id}", mw(http.HandlerFunc(ok))).Methods(http.MethodGet)
		requireSeparateLimits(t, serve(t, r))
	})
	t.Run("wrapped router sees no parameter", func(t *testing.T) {
		r := mux.NewRouter()
		r.HandleFunc("/users/{id}", ok).Methods(http.MethodGet)
		requireNoParam(t, serve(t, newMiddleware(t, "per-user", byParam(gorillaID))(r)))
	})
}

func TestGorillaServiceWideNotFoundAndMethodNotAllowed(t *testing.T) {
	t.Run("Use does not count them", func(t *testing.T) {
		r := mux.NewRouter()
		r.Use(mux.MiddlewareFunc(newMiddleware(t, "per-client", nil)))
		r.HandleFunc("/hello", ok).Methods(http.MethodGet)
		srv := serve(t, r)

		requireUnlimited(t, srv, http.MethodGet, "/nope", http.StatusNotFound)
		requireUnlimited(t, srv, http.MethodDelete, "/hello", http.StatusMethodNotAllowed)
		// The whole burst is still there, and an empty bucket does not
		// limit misses either.
		requireBurstThenDenied(t, srv, http.MethodGet, "/hello", http.StatusOK)
		requireUnlimited(t, srv, http.MethodGet, "/nope", http.StatusNotFound)
		requireUnlimited(t, srv, http.MethodDelete, "/hello", http.StatusMethodNotAllowed)
	})
	t.Run("wrapped router counts them", func(t *testing.T) {
		r := mux.NewRouter()
		r.HandleFunc("/hello", ok).Methods(http.MethodGet)
		requireMissesCounted(t, serve(t, newMiddleware(t, "per-client", nil)(r)))
	})
}

// --- net/http ServeMux ---

func TestServeMuxServiceWide(t *testing.T) {
	m := http.NewServeMux()
	m.HandleFunc("GET /hello", ok)
	m.HandleFunc("POST /orders", created)
	srv := serve(t, newMiddleware(t, "per-client", nil)(m))

	requireBurstThenDenied(t, srv, http.MethodGet, "/hello", http.StatusOK)
	requireDenied(t, do(t, srv, http.MethodPost, "/orders"))
}

func TestServeMuxPerRoute(t *testing.T) {
	m := http.NewServeMux()
	m.Handle("POST /orders", newMiddleware(t, "orders", nil)(http.HandlerFunc(created)))
	m.HandleFunc("GET /hello", ok)
	srv := serve(t, m)

	requireBurstThenDenied(t, srv, http.MethodPost, "/orders", http.StatusCreated)
	requireUnlimited(t, srv, http.MethodGet, "/hello", http.StatusOK)
	// A method the pattern does not match never reaches the route's
	// middleware.
	requireUnlimited(t, srv, http.MethodGet, "/orders", http.StatusMethodNotAllowed)
}

func TestServeMuxPathParam(t *testing.T) {
	t.Run("route", func(t *testing.T) {
		m := http.NewServeMux()
		m.Handle("GET /users/{id}", newMiddleware(t, "per-user", byParam(serveMuxID))(http.HandlerFunc(ok)))
		requireSeparateLimits(t, serve(t, m))
	})
	t.Run("wrapped mux sees no parameter", func(t *testing.T) {
		m := http.NewServeMux()
		m.HandleFunc("GET /users/{id}", ok)
		requireNoParam(t, serve(t, newMiddleware(t, "per-user", byParam(serveMuxID))(m)))
	})
}

func TestServeMuxServiceWideCountsNotFoundAndMethodNotAllowed(t *testing.T) {
	m := http.NewServeMux()
	m.HandleFunc("GET /hello", ok)
	requireMissesCounted(t, serve(t, newMiddleware(t, "per-client", nil)(m)))
}
