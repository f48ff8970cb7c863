package httplimit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memstore"
)

// show serves one request through mw and prints the status, the rate-limit
// fields and the body.
func show(mw func(http.Handler) http.Handler, remoteAddr string) {
	req := httptest.NewRequest(http.MethodGet, "/hello", nil)
	req.RemoteAddr = remoteAddr
	rec := httptest.NewRecorder()
	mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello\n") })).ServeHTTP(rec, req)
	fmt.Println(rec.Code)
	for _, field := range []string{"RateLimit-Policy", "RateLimit", "Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		for _, v := range rec.Header().Values(field) {
			fmt.Printf("%s: %s\n", field, v)
		}
	}
	fmt.Print(rec.Body.String())
	fmt.Println()
}

// The responses of a policy of 2 requests a minute, as docs/http.md shows
// them: allowed, denied, degraded (the store down, a Closed fallback), and
// a key function that cannot work on this server (a Unix-socket listener).
func Example_responses() {
	clock := sluicetest.NewFakeClock(time.Unix(1_700_000_000, 0))
	store, _ := memstore.New(memstore.WithClock(clock))
	tb, _ := tokenbucket.New(store)
	mw, _ := httplimit.Middleware([]httplimit.Policy{{Name: "per-client", Limiter: tb, Limit: sluice.PerMinute(2)}})

	fmt.Println("== allowed")
	show(mw, "203.0.113.7:4711")
	show(mw, "203.0.113.7:4711")
	fmt.Println("== denied")
	show(mw, "203.0.113.7:4711")

	fmt.Println("== degraded: the store is down, fallback.Closed")
	down, _ := tokenbucket.New(brokenStore{})
	closed, _ := fallback.New(down, fallback.WithPolicy(fallback.Closed()), fallback.WithBreaker(fallback.Breaker{Failures: 1, Cooldown: 5 * time.Second, Probes: 1}))
	degraded, _ := httplimit.Middleware([]httplimit.Policy{{Name: "per-client", Limiter: closed, Limit: sluice.PerMinute(2)}})
	show(degraded, "203.0.113.7:4711")

	fmt.Println("== misconfigured: RemoteAddr on a Unix-socket listener")
	quiet, _ := httplimit.Middleware([]httplimit.Policy{{Name: "per-client", Limiter: tb, Limit: sluice.PerMinute(2)}},
		httplimit.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	show(quiet, "@")

	// Output:
	// == allowed
	// 200
	// RateLimit-Policy: "per-client";q=2;w=60
	// RateLimit: "per-client";r=1;t=30
	// X-RateLimit-Limit: 2
	// X-RateLimit-Remaining: 1
	// X-RateLimit-Reset: 30
	// hello
	//
	// 200
	// RateLimit-Policy: "per-client";q=2;w=60
	// RateLimit: "per-client";r=0;t=30
	// X-RateLimit-Limit: 2
	// X-RateLimit-Remaining: 0
	// X-RateLimit-Reset: 60
	// hello
	//
	// == denied
	// 429
	// RateLimit-Policy: "per-client";q=2;w=60
	// RateLimit: "per-client";r=0;t=30
	// Retry-After: 30
	// X-RateLimit-Limit: 2
	// X-RateLimit-Remaining: 0
	// X-RateLimit-Reset: 60
	// {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Request cannot be satisfied as assigned quota has been exceeded","status":429,"detail":"rate limit \"per-client\" exceeded; retry after 30 s","violated-policies":["per-client"]}
	//
	// == degraded: the store is down, fallback.Closed
	// 503
	// RateLimit-Policy: "per-client";q=2;w=60
	// Retry-After: 5
	// {"type":"about:blank","title":"Service Unavailable","status":503,"detail":"the rate limiter is degraded: its store is unavailable, and policy \"per-client\" refuses requests until it recovers; retry after 5 s"}
	//
	// == misconfigured: RemoteAddr on a Unix-socket listener
	// 500
	// RateLimit-Policy: "per-client";q=2;w=60
	// {"type":"about:blank","title":"Internal Server Error","status":500,"detail":"rate limiting is misconfigured on this server: policy \"per-client\" cannot key requests"}
}

// brokenStore is a store whose Redis is down.
type brokenStore struct{}

func (brokenStore) Run(context.Context, *sluice.Script, []string, []int64) ([]int64, error) {
	return nil, errors.New("dial tcp 10.0.0.1:6379: connect: connection refused")
}
