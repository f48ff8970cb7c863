package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memstore"
)

// One policy for a free and a pro plan, the plan looked up by API key,
// where a report costs 10 of the budget a read costs 1 of. The fields
// state the limit of the client's plan.
func ExamplePolicy_tiers() {
	store, _ := memstore.New(memstore.WithClock(sluicetest.NewFakeClock(time.Unix(1_700_000_000, 0))))
	tb, _ := tokenbucket.New(store)
	plans := map[string]string{"acme": "pro"} // your accounts' plans
	mw, err := httplimit.Middleware([]httplimit.Policy{{
		Name:    "plan",
		Limiter: tb,
		Key:     httplimit.Header("X-API-Key"),
		Tiers: []httplimit.Tier{
			{Name: "free", Limit: sluice.PerMinute(60).WithBurst(10)},
			{Name: "pro", Limit: sluice.PerMinute(6000).WithBurst(500)},
		},
		DefaultTier: "free", // a key with no plan
		TierOf:      func(_ *http.Request, key string) (string, error) { return plans[key], nil },
		Costs:       []httplimit.RouteCost{{Route: "POST /reports", Cost: 10}},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, c := range []struct{ method, path, key string }{
		{"GET", "/items", "acme"}, {"POST", "/reports", "acme"}, {"GET", "/items", "newcomer"}, {"POST", "/reports", "newcomer"},
	} {
		req := httptest.NewRequest(c.method, c.path, nil)
		req.Header.Set("X-API-Key", c.key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Println(c.key, c.method, c.path, rec.Code, rec.Header().Get("RateLimit-Policy"), rec.Header().Get("RateLimit"))
	}
	// Output:
	// acme GET /items 200 "plan";q=500;w=5 "plan";r=499;t=1
	// acme POST /reports 200 "plan";q=500;w=5 "plan";r=489;t=1
	// newcomer GET /items 200 "plan";q=10;w=10 "plan";r=9;t=1
	// newcomer POST /reports 429 "plan";q=10;w=10 "plan";r=9;t=1
}
