package httplimit_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memstore"
)

// plansFile is issue 27's multi-tenant API in one policy: a free plan (60
// a minute, burst 10) and a pro plan (6,000 a minute, burst 500), chosen
// by the X-Plan header a gateway sets, where POST /reports costs 10 and
// GET /items 1 of the same budget.
const plansFile = `
policies:
  - name: plan
    key: header:X-API-Key
    algorithm: tokenbucket
    tier_from: header:X-Plan
    default_tier: free
    tiers:
      free: {rate: 60, period: 1m, burst: 10}
      pro:  {rate: 6000, period: 1m, burst: 500}
    costs:
      - {route: "POST /reports", cost: 10}
      - {route: "GET /items", cost: 1}
`

// plansHandler loads plansFile on a memstore whose clock stands still, so
// that no token comes back while a test spends a burst.
func plansHandler(t *testing.T, file string) http.Handler {
	t.Helper()
	clock := sluicetest.NewFakeClock(time.Unix(1_700_000_000, 0))
	policies, err := httplimit.Load([]byte(file), newMemStore(t, memstore.WithClock(clock)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = policies.Close() })
	require.Len(t, policies, 1, "one policy")
	mw, err := httplimit.Middleware(policies)
	require.NoError(t, err)
	return mw(ok)
}

// call sends one request with an API key and, unless plan is "", a plan.
func call(h http.Handler, method, path, apiKey, plan string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	r.Header.Set("X-API-Key", apiKey)
	if plan != "" {
		r.Header.Set("X-Plan", plan)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// allowedInARow counts the requests allowed before the first denial (at
// most max+1 are sent), and returns the denial.
func allowedInARow(t *testing.T, h http.Handler, method, path, apiKey, plan string, max int) (int, *httptest.ResponseRecorder) {
	t.Helper()
	for i := range max + 1 {
		w := call(h, method, path, apiKey, plan)
		if w.Code != http.StatusOK {
			return i, w
		}
	}
	t.Fatalf("%d requests allowed in a row, more than %d", max+1, max)
	return 0, nil
}

// TestOnePolicyServesPlansAndRouteCosts: issue 27's free and pro plans
// with route costs, which took six middlewares and a dispatch handler, are
// one policy of a file. A free key gets its burst of 10 GET /items, then a
// 429 whose fields state the free tier's limit (q=10 over w=10 s); a pro
// key gets 500 (q=500, w=5); one POST /reports spends 10 of the budget
// GET /items spends 1 of; a key's tiers never share state.
func TestOnePolicyServesPlansAndRouteCosts(t *testing.T) {
	h := plansHandler(t, plansFile)

	n, denial := allowedInARow(t, h, http.MethodGet, "/items", "free-key", "", 10)
	require.Equal(t, 10, n, "the free burst")
	require.Equal(t, http.StatusTooManyRequests, denial.Code)
	require.Equal(t, []string{`"plan";q=10;w=10`}, denial.Header().Values("RateLimit-Policy"))
	require.Equal(t, `"plan";r=0;t=1`, denial.Header().Get("RateLimit"), "a token a second comes back")
	require.Equal(t, "10", denial.Header().Get("X-RateLimit-Limit"))
	require.Equal(t, "1", denial.Header().Get("Retry-After"))

	n, denial = allowedInARow(t, h, http.MethodGet, "/items", "pro-key", "pro", 500)
	require.Equal(t, 500, n, "the pro burst")
	require.Equal(t, []string{`"plan";q=500;w=5`}, denial.Header().Values("RateLimit-Policy"))
	require.Equal(t, "500", denial.Header().Get("X-RateLimit-Limit"))

	w := call(h, http.MethodPost, "/reports", "reporter", "")
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, `"plan";r=0;t=1`, w.Header().Get("RateLimit"), "a report spends the whole free burst")
	require.Equal(t, http.StatusTooManyRequests, call(h, http.MethodGet, "/items", "reporter", "").Code,
		"GET /items draws on the budget the report spent")

	w = call(h, http.MethodGet, "/items", "free-key", "pro")
	require.Equal(t, http.StatusOK, w.Code, "free-key's pro tier has a state of its own")
	require.Equal(t, `"plan";r=499;t=1`, w.Header().Get("RateLimit"), "the pro burst less one")
	require.Equal(t, http.StatusTooManyRequests, call(h, http.MethodGet, "/items", "free-key", "").Code,
		"and its free tier is still spent")
	require.Equal(t, http.StatusTooManyRequests, call(h, http.MethodGet, "/items", "free-key", "unknown-plan").Code,
		"a plan no tier names is the default tier")
}

// TestPlansInCode: the same plans in code, the tier looked up by the key
// (TierOf) and a route cost table. The fields state the chosen tier's
// limit, a report spends 10 of the budget a read spends 1 of, and a client
// moved to another tier starts on that tier's state.
func TestPlansInCode(t *testing.T) {
	clock := sluicetest.NewFakeClock(time.Unix(1_700_000_000, 0))
	tb := tokenBucket(t, newMemStore(t, memstore.WithClock(clock)))
	plans := map[string]string{"acme": "pro"}
	h := newHandler(t, []httplimit.Policy{{
		Name: "plan", Limiter: tb, Key: httplimit.Header("X-API-Key"),
		Tiers: []httplimit.Tier{
			{Name: "free", Limit: sluice.PerMinute(60).WithBurst(10)},
			{Name: "pro", Limit: sluice.PerMinute(6000).WithBurst(500)},
		},
		DefaultTier: "free",
		TierOf:      func(_ *http.Request, key string) (string, error) { return plans[key], nil },
		Costs:       []httplimit.RouteCost{{Route: "POST /reports", Cost: 10}},
	}})

	w := call(h, http.MethodPost, "/reports", "acme", "")
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, []string{`"plan";q=500;w=5`}, w.Header().Values("RateLimit-Policy"))
	require.Equal(t, `"plan";r=490;t=1`, w.Header().Get("RateLimit"))
	w = call(h, http.MethodGet, "/items", "acme", "")
	require.Equal(t, `"plan";r=489;t=1`, w.Header().Get("RateLimit"), "a read costs Cost, 1, from the same budget")

	w = call(h, http.MethodGet, "/items", "nobody", "")
	require.Equal(t, []string{`"plan";q=10;w=10`}, w.Header().Values("RateLimit-Policy"), "an unknown key is on the default tier")
	require.Equal(t, "10", w.Header().Get("X-RateLimit-Limit"))
	require.Equal(t, "9", w.Header().Get("X-RateLimit-Remaining"))

	plans["acme"] = "free"
	w = call(h, http.MethodGet, "/items", "acme", "")
	require.Equal(t, `"plan";r=9;t=1`, w.Header().Get("RateLimit"), "acme's free tier has a state of its own")
}

// newHandler is Middleware(policies) around ok.
func newHandler(t *testing.T, policies []httplimit.Policy, opts ...httplimit.Option) http.Handler {
	t.Helper()
	mw, err := httplimit.Middleware(policies, opts...)
	require.NoError(t, err)
	return mw(ok)
}

// TestTierErrors: a tier function's error is answered as a key function's
// (400 with a NoKeyError's reason, 500 for ErrKeyMisconfigured), a tier
// the policy does not have is 500 and logged, never a panic; and a
// request one policy cannot key or tier is answered before any policy
// counts it.
func TestTierErrors(t *testing.T) {
	var tierErr error
	tierName := "gold"
	var logs bytes.Buffer
	tb := tokenBucket(t, newMemStore(t))
	h := newHandler(t, []httplimit.Policy{
		{Name: "per-client", Limiter: tb, Limit: sluice.PerMinute(1)},
		{Name: "plan", Limiter: tb, Key: httplimit.Header("X-API-Key"),
			Tiers:       []httplimit.Tier{{Name: "free", Limit: sluice.PerMinute(5)}},
			DefaultTier: "free",
			TierOf:      func(*http.Request, string) (string, error) { return tierName, tierErr }},
	}, httplimit.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))

	w := call(h, http.MethodGet, "/items", "k", "")
	require.Equal(t, http.StatusInternalServerError, w.Code)
	require.Contains(t, w.Body.String(), `policy \"plan\" cannot choose the request's tier`)
	require.Equal(t, []string{`"per-client";q=1;w=60`}, w.Header().Values("RateLimit-Policy"),
		"the tiered policy, whose tier is unknown, states no quota")
	require.Empty(t, w.Header().Values("RateLimit"), "no policy counted the request")
	lines := logLines(t, &logs, "httplimit: rate limiting is misconfigured")
	require.Len(t, lines, 1)
	require.Contains(t, lines[0]["err"], `policy "plan" has no tier "gold"`)

	tierName, tierErr = "", &httplimit.NoKeyError{Reason: "no plan"}
	w = call(h, http.MethodGet, "/items", "k", "")
	require.Equal(t, http.StatusBadRequest, w.Code)
	require.Contains(t, w.Body.String(), `policy \"plan\": no plan`)

	tierErr = fmt.Errorf("plans unreachable: %w", httplimit.ErrKeyMisconfigured)
	w = call(h, http.MethodGet, "/items", "k", "")
	require.Equal(t, http.StatusInternalServerError, w.Code)
	require.Contains(t, w.Body.String(), `policy \"plan\" cannot key requests`)

	tierErr = nil
	w = call(h, http.MethodGet, "/items", "k", "")
	require.Equal(t, http.StatusOK, w.Code, "per-client (1 a minute) counted none of the three failed requests")
	require.Equal(t, `"plan";r=4;t=12`, w.Header().Values("RateLimit")[1])
}
