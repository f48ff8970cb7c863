package replay

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/replay/accesslog"
)

const tieredFile = `policies:
  - name: plan
    key: header:X-API-Key
    algorithm: tokenbucket
    tier_from: key-prefix
    default_tier: free
    tiers:
      free: {rate: 60, period: 1m, burst: 10}
      pro:  {rate: 6000, period: 1m, burst: 500, values: ["pro-"]}
    costs:
      - {route: "POST /reports", cost: 10}
  - name: per-route
    routes: ["GET /items"]
    rate: 5
    period: 1s
`

func req(key string, ms int, method, path string) accesslog.Record {
	r := at(key, ms)
	r.Method, r.Path = method, path
	return r
}

func TestLoadPoliciesReplaysEachTierApart(t *testing.T) {
	policies, err := LoadPolicies([]byte(tieredFile))
	require.NoError(t, err)
	require.Len(t, policies, 3)
	require.Equal(t, []string{"plan/free", "plan/pro", "per-route"}, []string{policies[0].Name, policies[1].Name, policies[2].Name})
	require.Equal(t, sluice.Limit{Rate: 60, Period: time.Minute, Burst: 10}, policies[0].Limit)
	require.Equal(t, sluice.Limit{Rate: 6000, Period: time.Minute, Burst: 500}, policies[1].Limit)
	require.Equal(t, []RouteCost{{Route: "POST /reports", Cost: 10}}, policies[0].Costs)

	// A free key: one report spends its burst of 10, the next item is
	// denied. A pro key: 50 reports spend its 500, the 51st is denied.
	recs := []accesslog.Record{req("acme", 0, "POST", "/reports"), req("acme", 1, "GET", "/items")}
	for i := range 51 {
		recs = append(recs, req("pro-7", 2+i, "POST", "/reports"))
	}
	rep, got := decisions(t, Config{Policies: policies, Algorithms: []string{"tokenbucket"}}, recs...)
	require.Equal(t, "+-", allowedOf(got["plan/free/tokenbucket"]))
	require.Equal(t, int64(10), got["plan/free/tokenbucket"][0].Cost)
	pro := got["plan/pro/tokenbucket"]
	require.Len(t, pro, 51)
	require.Equal(t, "+", allowedOf(pro[49:50]))
	require.Equal(t, "-", allowedOf(pro[50:]))
	// GET /items only, and the one there was denied by plan/free first:
	// policies apply in order, as in httplimit.
	require.Empty(t, got["per-route/tokenbucket"])
	require.EqualValues(t, 2, rep.Input.Stopped) // acme's item, pro-7's 51st report
	for _, r := range rep.Results {
		if r.Policy == "plan/free" {
			require.EqualValues(t, 1, r.Keys)
		}
	}
}

func TestLoadPoliciesRefusals(t *testing.T) {
	_, err := LoadPolicies([]byte(`policies:
  - name: plan
    tier_from: header:X-Plan
    default_tier: free
    tiers:
      free: {rate: 60, period: 1m, burst: 10}
      pro:  {rate: 6000, period: 1m, burst: 500}
`))
	require.ErrorContains(t, err, "tier_from header:X-Plan: an access log does not say which tier")

	// What httplimit.Load refuses, with its error.
	_, err = LoadPolicies([]byte("policies:\n  - name: p\n    rate: 5\n    period: 1s\n    colour: blue\n"))
	require.ErrorContains(t, err, "colour")
	_, err = LoadPolicies([]byte("policies: []\n"))
	require.ErrorContains(t, err, "no policy")
}

func TestRouteCostsChargeOneBudget(t *testing.T) {
	cfg := Config{Algorithms: []string{"fixedwindow"}, Policies: []Policy{{Name: "p", Limit: sluice.PerMinute(12),
		Costs: []RouteCost{{Route: "POST /reports", Cost: 10}, {Route: "GET /items/{id}", Cost: 2}}}}}
	_, got := decisions(t, cfg, req("a", 0, "POST", "/reports"), req("a", 1, "GET", "/items/3"), req("a", 2, "GET", "/"))
	ds := got["p/fixedwindow"]
	require.Equal(t, []int64{10, 2, 1}, []int64{ds[0].Cost, ds[1].Cost, ds[2].Cost})
	require.Equal(t, "++-", allowedOf(ds))

	cfg.Policies[0].Costs = []RouteCost{{Route: "POST /reports", Cost: 10}, {Route: "POST /reports", Cost: 3}}
	_, err := Run(t.Context(), &records{}, cfg)
	require.ErrorContains(t, err, "conflicts")
	cfg.Policies[0].Costs = []RouteCost{{Route: "POST /reports", Cost: 0}}
	_, err = Run(t.Context(), &records{}, cfg)
	require.ErrorContains(t, err, "below 1")
	cfg.Policies[0].Costs, cfg.Policies[0].Tier = nil, "pro"
	_, err = Run(t.Context(), &records{}, cfg)
	require.ErrorContains(t, err, "TierOf")
}

func TestPoliciesApplyInOrder(t *testing.T) {
	// "first" allows 2 a second; "second" 1 a second. Under httplimit the
	// third request never reaches "second": the first denial answers.
	// A shadow "first" stops nothing.
	recs := []accesslog.Record{at("a", 0), at("a", 1), at("a", 2)}
	for _, shadow := range []bool{false, true} {
		cfg := Config{Algorithms: []string{"fixedwindow"}, Policies: []Policy{
			{Name: "first", Limit: sluice.PerSecond(2), Shadow: shadow},
			{Name: "second", Limit: sluice.PerSecond(1)},
		}}
		rep, got := decisions(t, cfg, recs...)
		require.Equal(t, "++-", allowedOf(got["first/fixedwindow"]))
		if shadow {
			require.Equal(t, "+--", allowedOf(got["second/fixedwindow"]))
			require.Zero(t, rep.Input.Stopped)
		} else {
			require.Equal(t, "+-", allowedOf(got["second/fixedwindow"]))
			require.EqualValues(t, 1, rep.Input.Stopped)
		}
	}
	// The alternatives of a policy see what its own algorithm let through
	// the policies before it, whatever they decide themselves.
	cfg := Config{Policies: []Policy{
		{Name: "first", Algorithm: "fixedwindow", Limit: sluice.PerSecond(2)},
		{Name: "second", Limit: sluice.PerSecond(5)},
	}}
	rep, got := decisions(t, cfg, recs...)
	for _, r := range rep.Results {
		if r.Policy == "second" {
			require.EqualValues(t, 2, r.Requests, r.Algorithm)
		}
	}
	require.Len(t, got["first/tokenbucket"], 3)
}
