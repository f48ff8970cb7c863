// Command tieredapi is a multi-tenant API limited by Sluice with one
// policy: a free plan (60 requests a minute, burst 10) and a pro plan
// (6,000 a minute, burst 500), where POST /reports costs 10 and GET /items
// 1 of the same budget. Each plan is a tier of the policy, chosen by the
// account's plan; the RateLimit fields state the client's plan's limit.
//
// The limiter is the token bucket on Redis, behind a fallback (Open: while
// Redis is unavailable, requests go through undecided rather than fail)
// and sluiceotel (a span and metrics per decision, on the global
// OpenTelemetry providers: install your SDK's to export them).
//
//	go run ./examples/tieredapi                         # the embedded store: no Redis to set up
//	go run ./examples/tieredapi -redis localhost:6379   # or REDIS_ADDR=localhost:6379
//	curl -i -H 'X-API-Key: free-1' localhost:8080/items
//	curl -i -X POST -H 'X-API-Key: pro-1' localhost:8080/reports
//
// The same policy in a policy file (httplimit.Load) is in docs/http.md,
// "Tiers and route costs".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/sluiceotel"
	"github.com/sluicehq/sluice/store/embedded"
	"github.com/sluicehq/sluice/store/goredisstore"
)

func main() {
	addr := flag.String("addr", envOr("ADDR", "localhost:8080"), "the address to listen on (ADDR)")
	redisAddr := flag.String("redis", os.Getenv("REDIS_ADDR"), "the Redis server's address (REDIS_ADDR); none: the embedded store")
	flag.Parse()
	if err := run(*addr, *redisAddr); err != nil {
		fmt.Fprintln(os.Stderr, "tieredapi:", err)
		os.Exit(1)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(addr, redisAddr string) error {
	var store sluice.Store
	if redisAddr != "" {
		client := redis.NewClient(&redis.Options{Addr: redisAddr})
		defer client.Close()
		s, err := goredisstore.New(client)
		if err != nil {
			return err
		}
		store = s
		log.Printf("limits on Redis at %s", redisAddr)
	} else {
		s, err := embedded.Start()
		if err != nil {
			return err
		}
		defer s.Close()
		store = s
		log.Printf("limits on the embedded store (give -redis to share them between replicas)")
	}
	handler, err := newHandler(store, demoAccounts(), deps{})
	if err != nil {
		return err
	}
	log.Printf("listening on %s; API keys free-1 and pro-1", addr)
	srv := &http.Server{Addr: addr, Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// accounts are the API keys the service issued and each one's plan: a
// stand-in for the accounts database.
type accounts struct {
	mu    sync.RWMutex
	plans map[string]string // API key: "free" or "pro"
}

func demoAccounts() *accounts {
	return &accounts{plans: map[string]string{"free-1": "free", "free-2": "free", "pro-1": "pro"}}
}

func (a *accounts) plan(key string) (string, bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	plan, ok := a.plans[key]
	return plan, ok
}

func (a *accounts) setPlan(key, plan string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.plans[key] = plan
}

// deps are what a test replaces: the clock the token bucket decides by
// (nil: the Redis server's, what production wants) and sluiceotel's
// options (none: the global providers).
type deps struct {
	clock   sluice.Clock
	tracing []sluiceotel.Option
}

// planKey is the context key of the authenticated account's plan.
type planKey struct{}

// newHandler builds the service: authentication (401 for a key the
// service did not issue), then the one rate-limit policy, then the API.
// The policy comes after authentication, so that its tier is the plan of
// a real account and made-up keys never reach Redis.
func newHandler(store sluice.Store, accts *accounts, d deps) (http.Handler, error) {
	var tbOpts []tokenbucket.Option
	if d.clock != nil {
		tbOpts = append(tbOpts, tokenbucket.WithClock(d.clock))
	}
	tb, err := tokenbucket.New(store, tbOpts...)
	if err != nil {
		return nil, err
	}
	// Outermost last: the fallback decides while Redis fails, and
	// sluiceotel, around it, records those decisions too.
	failSafe, err := fallback.New(tb, fallback.WithPolicy(fallback.Open()))
	if err != nil {
		return nil, err
	}
	limiter, err := sluiceotel.New(failSafe, append([]sluiceotel.Option{
		sluiceotel.WithAlgorithm("tokenbucket"), sluiceotel.WithPolicyName("plan")}, d.tracing...)...)
	if err != nil {
		return nil, err
	}
	limit, err := httplimit.Middleware([]httplimit.Policy{{
		Name:    "plan",
		Limiter: limiter,
		Key:     httplimit.Header("X-API-Key"),
		Tiers: []httplimit.Tier{
			{Name: "free", Limit: sluice.PerMinute(60).WithBurst(10)},
			{Name: "pro", Limit: sluice.PerMinute(6000).WithBurst(500)},
		},
		DefaultTier: "free",
		TierOf: func(r *http.Request, _ string) (string, error) {
			plan, _ := r.Context().Value(planKey{}).(string)
			return plan, nil
		},
		Costs: []httplimit.RouteCost{
			{Route: "POST /reports", Cost: 10},
			{Route: "GET /items", Cost: 1},
		},
	}})
	if err != nil {
		return nil, err
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /items", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, `["a","b","c"]`) })
	mux.HandleFunc("POST /reports", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintln(w, "report queued")
	})
	return authenticate(accts, limit(mux)), nil
}

// authenticate answers 401 to a request whose X-API-Key the service did
// not issue, and puts the account's plan in the context of the others.
func authenticate(accts *accounts, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		plan, ok := accts.plan(r.Header.Get("X-API-Key"))
		if !ok {
			http.Error(w, "unknown API key", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), planKey{}, plan)))
	})
}
