// Command httpservice is a small net/http service limited by Sluice, on the
// embedded default (no Redis to set up): per client address, and per API
// key on POST /orders.
//
//	go run ./examples/httpservice
//	curl -i localhost:8080/hello
//	curl -i -X POST -H 'X-API-Key: k1' localhost:8080/orders
//
// Swap embedded.Start() for goredisstore.New(client) to share the limits
// between replicas, and put fallback.New around each limiter then (see
// newHandler).
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

	handler, err := newHandler(store, nil)
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
// in one middleware.
//
// The limiters decide on the store directly. In front of a Redis over the
// network, wrap each in fallback.New (docs/failure.md) so that requests
// keep being decided when Redis is down; the embedded store runs in this
// process and does not fail that way, and a fallback budget (50 ms by
// default) shorter than the time calls queue for it under load would
// decide the queued calls by the fallback policy, uncounted.
//
// clock, when not nil, is the time the per-client bucket decides by (for
// tests); nil is the store's clock, what a service wants.
func newHandler(store sluice.Store, clock sluice.Clock) (http.Handler, error) {
	var opts []tokenbucket.Option
	if clock != nil {
		opts = append(opts, tokenbucket.WithClock(clock))
	}
	perClient, err := tokenbucket.New(store, opts...)
	if err != nil {
		return nil, err
	}
	perKey, err := slidingcounter.New(store)
	if err != nil {
		return nil, err
	}
	limit, err := httplimit.Middleware([]httplimit.Policy{
		{Name: "per-client", Limiter: perClient, Limit: sluice.PerMinute(60).WithBurst(10)},
		{Name: "orders", Limiter: perKey, Limit: sluice.PerMinute(5), Key: httplimit.Header("X-API-Key"), Routes: []string{"POST /orders"}},
	})
	if err != nil {
		return nil, err
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "hello") })
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintln(w, "order placed")
	})
	return limit(mux), nil
}
