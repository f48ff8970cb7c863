// Command httpservice is a small net/http service limited by Sluice, on the
// embedded default (no Redis to set up): per client address, and per API
// key on POST /orders.
//
//	go run ./examples/httpservice
//	curl -i localhost:8080/hello
//	curl -i -X POST -H 'X-API-Key: k1' localhost:8080/orders
//
// Swap embedded.Start() for goredisstore.New(client) to share the limits
// between replicas.
package main

import (
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/slidingcounter"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/store/embedded"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "httpservice:", err)
		os.Exit(1)
	}
}

func run() error {
	store, err := embedded.Start()
	if err != nil {
		return err
	}
	defer store.Close()

	handler, err := newHandler(store)
	if err != nil {
		return err
	}
	addr := "localhost:8080"
	if a := os.Getenv("ADDR"); a != "" {
		addr = a
	}
	log.Printf("listening on %s", addr)
	srv := &http.Server{Addr: addr, Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// newHandler builds the service: a token bucket per client address on
// every route, and a sliding window counter per API key on POST /orders,
// both behind the fallback decorator (fail open if the store fails).
func newHandler(store sluice.Store) (http.Handler, error) {
	tb, err := tokenbucket.New(store)
	if err != nil {
		return nil, err
	}
	perClient, err := fallback.New(tb)
	if err != nil {
		return nil, err
	}
	sc, err := slidingcounter.New(store)
	if err != nil {
		return nil, err
	}
	perKey, err := fallback.New(sc)
	if err != nil {
		return nil, err
	}
	everyRoute, err := httplimit.Middleware([]httplimit.Policy{
		{Name: "per-client", Limiter: perClient, Limit: sluice.PerMinute(60).WithBurst(10)},
	})
	if err != nil {
		return nil, err
	}
	orders, err := httplimit.Middleware([]httplimit.Policy{
		{Name: "orders", Limiter: perKey, Limit: sluice.PerMinute(5), Key: httplimit.Header("X-API-Key")},
	})
	if err != nil {
		return nil, err
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "hello") })
	mux.Handle("POST /orders", orders(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintln(w, "order placed")
	})))
	return everyRoute(mux), nil
}
