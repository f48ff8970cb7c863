package httplimit_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/fixedwindow"
	"github.com/sluicehq/sluice/httplimit"
)

// TestTieredPoliciesRefusedInCode: Middleware refuses, naming the policy
// and the field, a tiered policy it could not serve: an unknown or
// missing default tier, no tier function, Limit beside Tiers, two tiers
// of one name, a tier's limit the algorithm refuses (a burst on a window
// algorithm), a route cost above a tier's capacity, and a cost route
// that ServeMux refuses.
func TestTieredPoliciesRefusedInCode(t *testing.T) {
	tb := tokenBucket(t, newMemStore(t))
	fw, err := fixedwindow.New(newMemStore(t))
	require.NoError(t, err)
	free := httplimit.Tier{Name: "free", Limit: sluice.PerMinute(60).WithBurst(10)}
	pro := httplimit.Tier{Name: "pro", Limit: sluice.PerMinute(6000).WithBurst(500)}
	tierOf := func(*http.Request, string) (string, error) { return "", nil }
	plan := func(edit func(*httplimit.Policy)) []httplimit.Policy {
		p := httplimit.Policy{Name: "plan", Limiter: tb, Tiers: []httplimit.Tier{free, pro}, DefaultTier: "free", TierOf: tierOf}
		edit(&p)
		return []httplimit.Policy{p}
	}
	_, err = httplimit.Middleware(plan(func(*httplimit.Policy) {}))
	require.NoError(t, err, "the policy the cases below break")
	for _, c := range []struct {
		policies []httplimit.Policy
		want     string
	}{
		{plan(func(p *httplimit.Policy) { p.DefaultTier = "gold" }),
			`httplimit: policy "plan": default_tier: "gold" is not one of the policy's tiers`},
		{plan(func(p *httplimit.Policy) { p.DefaultTier = "" }), `httplimit: policy "plan": default_tier: none given`},
		{plan(func(p *httplimit.Policy) { p.TierOf = nil }), `httplimit: policy "plan": tier_of: none given`},
		{plan(func(p *httplimit.Policy) { p.Limit = sluice.PerMinute(1) }), `httplimit: policy "plan": limit: give Limit or Tiers, not both`},
		{plan(func(p *httplimit.Policy) { p.Tiers = nil; p.Limit = sluice.PerMinute(1) }),
			`httplimit: policy "plan": tiers: none given, but TierOf or DefaultTier is`},
		{plan(func(p *httplimit.Policy) { p.Tiers = append(p.Tiers, free) }), `httplimit: policy "plan": tiers: name "free" is taken by an earlier tier`},
		{plan(func(p *httplimit.Policy) { p.Tiers[1].Name = "pro plan" }), `httplimit: policy "plan": tiers: name "pro plan": use 1 to 64 letters`},
		{plan(func(p *httplimit.Policy) { p.Limiter = fw }),
			`httplimit: policy "plan": tier "free": burst: 10, but this algorithm has no burst`},
		{plan(func(p *httplimit.Policy) { p.Tiers[0].Limit = sluice.Limit{} }), `httplimit: policy "plan": tier "free": limit: `},
		{plan(func(p *httplimit.Policy) { p.Costs = []httplimit.RouteCost{{Route: "POST /reports", Cost: 11}} }),
			`httplimit: policy "plan": tier "free": cost of route "POST /reports": `},
		{plan(func(p *httplimit.Policy) { p.Cost = 11 }), `httplimit: policy "plan": tier "free": cost: `},
		{plan(func(p *httplimit.Policy) { p.Costs = []httplimit.RouteCost{{Route: "GET", Cost: 2}} }),
			`httplimit: policy "plan": cost of route "GET": `},
		{plan(func(p *httplimit.Policy) {
			p.Costs = []httplimit.RouteCost{{Route: "POST /reports", Cost: 2}, {Route: "POST /reports", Cost: 3}}
		}), `httplimit: policy "plan": cost of route "POST /reports": `},
		{plan(func(p *httplimit.Policy) { p.Costs = []httplimit.RouteCost{{Route: "POST /reports"}} }),
			`httplimit: policy "plan": cost of route "POST /reports": 0: a route's cost is at least 1`},
	} {
		_, err := httplimit.Middleware(c.policies)
		require.ErrorContains(t, err, c.want)
	}
}

// TestTieredPolicyFilesRefused: Load refuses, naming the policy and the
// field, a tiered policy it could not serve: an unknown default tier,
// overlapping tiers (two key prefixes one of which starts the other,
// one header value for two tiers, a tier given twice in JSON), a tier
// whose limit the algorithm refuses, a route cost above a tier's capacity
// or a sharded key's or a local fallback's share of it, an unknown field, a cost route that
// ServeMux refuses; and nothing is left open.
func TestTieredPolicyFilesRefused(t *testing.T) {
	const head = "policies:\n  - name: plan\n    key: header:X-API-Key\n"
	for _, c := range []struct{ file, want string }{
		{head + `    tier_from: header:X-Plan
    default_tier: gold
    tiers: {free: {rate: 60, period: 1m}, pro: {rate: 600, period: 1m}}`,
			`httplimit: policy 1 ("plan"): default_tier: "gold" is not one of the tiers (free, pro)`},
		{head + `    tier_from: header:X-Plan
    tiers: {free: {rate: 60, period: 1m}}`,
			`httplimit: policy 1 ("plan"): default_tier: none given`},
		{head + `    tier_from: key-prefix
    default_tier: free
    tiers: {free: {rate: 60, period: 1m}, pro: {rate: 600, period: 1m, values: [pk_]}, live: {rate: 6000, period: 1m, values: [pk_live_]}}`,
			`httplimit: policy 1 ("plan"): tiers: "live" and "pro" overlap: key prefixes "pk_live_" and "pk_" would both choose a key`},
		{head + `    tier_from: key-prefix
    default_tier: free
    tiers: {free: {rate: 60, period: 1m}, pro: {rate: 600, period: 1m}}`,
			`httplimit: policy 1 ("plan"): tiers: "pro": values: none, so no key chooses it`},
		{head + `    tier_from: header:X-Plan
    default_tier: free
    tiers: {free: {rate: 60, period: 1m}, pro: {rate: 600, period: 1m, values: [free, pro]}}`,
			`httplimit: policy 1 ("plan"): tiers: "free" and "pro" overlap: header value "free" would choose both`},
		{`{"policies": [{"name": "plan", "tier_from": "header:X-Plan", "default_tier": "free",
  "tiers": {"free": {"rate": 60, "period": "1m"}, "free": {"rate": 600, "period": "1m"}}}]}`,
			`tiers: "free" is given twice`},
		{head + `    tier_from: header:X-Plan
    default_tier: free
    tiers: {free: {rate: 60, period: 1m}, free: {rate: 600, period: 1m}}`,
			`mapping key "free" already defined`},
		{head + `    algorithm: fixedwindow
    tier_from: header:X-Plan
    default_tier: free
    tiers: {free: {rate: 60, period: 1m, burst: 10}}`,
			`httplimit: policy 1 ("plan"): tier "free": burst: 10, but fixedwindow has no burst`},
		{head + `    tier_from: header:X-Plan
    default_tier: free
    tiers: {free: {rate: 60, period: 1m, burst: 10}, pro: {rate: 6000, period: 1m, burst: 500}}
    costs: [{route: "POST /reports", cost: 11}]`,
			`httplimit: policy 1 ("plan"): tier "free": route "POST /reports": cost: 11 can never be allowed: the limit's capacity is 10`},
		{head + `    shards: 4
    tier_from: header:X-Plan
    default_tier: pro
    tiers: {free: {rate: 60, period: 1m, burst: 10}, pro: {rate: 6000, period: 1m, burst: 500}}
    costs: [{route: "POST /reports", cost: 10}]`,
			`httplimit: policy 1 ("plan"): tier "free": route "POST /reports": cost: 10 can never be allowed on a sharded key`},
		{head + `    fallback: local
    replicas: 2
    tier_from: header:X-Plan
    default_tier: pro
    tiers: {free: {rate: 60, period: 1m, burst: 10}, pro: {rate: 6000, period: 1m, burst: 500}}
    costs: [{route: "POST /reports", cost: 10}]`,
			`httplimit: policy 1 ("plan"): tier "free": route "POST /reports": cost: 10 can never be allowed while the store fails`},
		{head + `    tier_from: header:X-Plan
    default_tier: free
    tiers: {free: {rate: 60, period: 1m, colour: red}}`,
			`field colour not found in type httplimit.FileTier`},
		{`{"policies": [{"name": "plan", "tier_from": "header:X-Plan", "default_tier": "free",
  "tiers": {"free": {"rate": 60, "period": "1m", "colour": "red"}}}]}`,
			`tiers: "free": json: unknown field "colour"`},
		{head + `    tier_from: header:X-Plan
    default_tier: free
    tiers: {free: {rate: 60, period: 1m}}
    costs: [{route: "GET", cost: 2}]`,
			`httplimit: policy "plan": cost of route "GET": `},
		{head + `    tier_from: header:X-Plan
    default_tier: free
    tiers: {free: {rate: 60, period: 1m}}
    costs: [{route: "/a", cost: 2, per: request}]`,
			`field per not found in type httplimit.RouteCost`},
		{head + `    tier_from: cookie:plan
    default_tier: free
    tiers: {free: {rate: 60, period: 1m}}`,
			`httplimit: policy 1 ("plan"): tier_from: unknown "cookie:plan" (header:Name or key-prefix)`},
		{head + `    default_tier: free
    tiers: {free: {rate: 60, period: 1m}}`,
			`httplimit: policy 1 ("plan"): tier_from: none given`},
		{head + `    tier_from: header:X-Plan
    default_tier: free
    rate: 60
    period: 1m
    tiers: {free: {rate: 60, period: 1m}}`,
			`httplimit: policy 1 ("plan"): rate, period, burst: a policy with tiers has the limits of its tiers`},
		{head + `    tier_from: header:X-Plan
    rate: 60
    period: 1m`,
			`httplimit: policy 1 ("plan"): tiers: none given, but tier_from or default_tier is`},
	} {
		_, err := httplimit.Load([]byte(c.file), newMemStore(t))
		require.ErrorContains(t, err, c.want, c.file)
	}
}
