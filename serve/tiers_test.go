package serve_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/serve"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memstore"
)

// plansPolicies is issue 27's free and pro plans in the native format: the
// descriptor (api_key, plan), the tier chosen by the plan entry's value.
const plansPolicies = `domain: edge
policies:
  - name: plan
    match: [{key: api_key}, {key: plan}]
    tier_from: descriptor:plan
    default_tier: free
    tiers:
      free: {rate: 60, period: 1m, burst: 10}
      pro: {rate: 6000, period: 1m, burst: 500, values: [pro, pro-annual]}
`

// newPlansServer serves config on a memstore whose clock stands still.
func newPlansServer(t *testing.T, config string, logger *slog.Logger) (*serve.Server, *memstore.Store) {
	t.Helper()
	store := newMemStore(t, memstore.WithClock(sluicetest.NewFakeClock(time.Unix(1_700_000_000, 0))))
	srv, err := serve.New([]byte(config), store, nil, logger)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	return srv, store
}

// askHits asks for one descriptor with a hits_addend.
func askHits(t *testing.T, c rlsv3.RateLimitServiceClient, hits uint64, d *ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	d.HitsAddend = wrapperspb.UInt64(hits)
	return ask(t, c, d)
}

func addedHeaders(resp *rlsv3.RateLimitResponse) map[string]string {
	h := map[string]string{}
	for _, v := range resp.GetResponseHeadersToAdd() {
		h[v.GetKey()] = v.GetValue()
	}
	return h
}

// TestTiersByDescriptorValue: tier_from: descriptor:plan chooses the tier
// one of whose values the plan entry holds (by default its name), the
// default tier for any other value; each tier counts apart, every value of
// a tier in its one state; current_limit, the RateLimit fields and POST
// /v1/allow state the tier's limit.
func TestTiersByDescriptorValue(t *testing.T) {
	srv, store := newPlansServer(t, plansPolicies, nil)
	rls := startRLS(t, srv)

	var resp *rlsv3.RateLimitResponse
	for i := range 11 {
		resp = ask(t, rls, descriptor("api_key", "k1", "plan", "free"))
		if i < 10 {
			require.Equal(t, ok, resp.GetOverallCode(), "request %d", i+1)
		}
	}
	require.Equal(t, over, resp.GetOverallCode(), "the free burst is 10")
	st := resp.GetStatuses()[0]
	require.Equal(t, uint32(60), st.GetCurrentLimit().GetRequestsPerUnit())
	require.Equal(t, rlsv3.RateLimitResponse_RateLimit_MINUTE, st.GetCurrentLimit().GetUnit())
	require.Equal(t, `"plan";q=10;w=10`, addedHeaders(resp)["RateLimit-Policy"])

	resp = askHits(t, rls, 500, descriptor("api_key", "k2", "plan", "pro"))
	require.Equal(t, ok, resp.GetOverallCode(), "the pro burst is 500")
	require.Equal(t, uint32(6000), resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit())
	require.Equal(t, `"plan";q=500;w=5`, addedHeaders(resp)["RateLimit-Policy"])
	require.Equal(t, over, ask(t, rls, descriptor("api_key", "k2", "plan", "pro-annual")).GetOverallCode(),
		"pro-annual chooses the pro tier, and its state")
	bucket, err := tokenbucket.New(store)
	require.NoError(t, err)
	peek, err := bucket.AllowN(context.Background(), sluice.Key("k2", "serve", "edge", "plan", "pro"), sluice.PerMinute(6000).WithBurst(500), 0)
	require.NoError(t, err)
	require.Zero(t, peek.Remaining, "the key names the tier, not the plan entry's value")

	resp = ask(t, rls, descriptor("api_key", "k3", "plan", "gold"))
	require.Equal(t, uint32(60), resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit(), "a value no tier holds: the default")

	resp = ask(t, rls, descriptor("api_key", "k1", "plan", "pro"))
	require.Equal(t, ok, resp.GetOverallCode(), "k1's pro tier counts apart from its spent free tier")
	require.Equal(t, uint32(499), resp.GetStatuses()[0].GetLimitRemaining())

	web := httptest.NewServer(srv.Handler(nil))
	t.Cleanup(web.Close)
	r, body := post(t, web.URL+"/v1/allow", `{"policy": "plan", "descriptor": [{"key": "api_key", "value": "k1"}, {"key": "plan", "value": "pro-annual"}]}`)
	require.Equal(t, http.StatusOK, r.StatusCode, body)
	var d serve.AllowResponse
	require.NoError(t, json.Unmarshal([]byte(body), &d))
	require.True(t, d.Allowed)
	require.Equal(t, int64(498), d.Remaining, "the same pro state as the gRPC descriptor's")
	require.Equal(t, `"plan";q=500;w=5`, r.Header.Get("RateLimit-Policy"))
}

// TestShadowTieredServePolicy: a tiered shadow policy answers OK at its
// tier's limit and logs the would-be denial with the tier.
func TestShadowTieredServePolicy(t *testing.T) {
	var logs lockedBuffer
	srv, _ := newPlansServer(t, plansPolicies+"    shadow: true\n", slog.New(slog.NewJSONHandler(&logs, nil)))
	rls := startRLS(t, srv)
	for range 11 {
		require.Equal(t, ok, ask(t, rls, descriptor("api_key", "k1", "plan", "free")).GetOverallCode())
	}
	lines := logs.lines(t, serve.ShadowDenialMessage)
	require.Len(t, lines, 1)
	require.Equal(t, "free", lines[0]["tier"])
}

// TestTieredPoliciesRefused: New refuses, naming the policy and the
// field, a tiered policy it could not serve: an unknown or missing default
// tier, overlapping tiers (one value for two), a tier_from entry the
// policy does not match or matches at one value, a tier whose limit the
// algorithm refuses, a cost above a tier's capacity or a sharded key's
// share of it, rate beside tiers, tiers without tier_from, an unknown
// field.
func TestTieredPoliciesRefused(t *testing.T) {
	const head = "policies:\n  - name: plan\n    match: [{key: api_key}, {key: plan}]\n"
	const tiers = "    tiers: {free: {rate: 60, period: 1m, burst: 10}, pro: {rate: 6000, period: 1m, burst: 500}}\n"
	for _, c := range []struct{ file, want string }{
		{head + "    tier_from: descriptor:plan\n    default_tier: gold\n" + tiers,
			`serve: policy 1 ("plan"): default_tier: "gold" is not one of the tiers (free, pro)`},
		{head + "    tier_from: descriptor:plan\n" + tiers, `serve: policy 1 ("plan"): default_tier: none given`},
		{head + "    tier_from: descriptor:plan\n    default_tier: free\n    tiers: {free: {rate: 60, period: 1m}, pro: {rate: 600, period: 1m, values: [pro, free]}}\n",
			`serve: policy 1 ("plan"): tiers: "free" and "pro" overlap: descriptor value "free" would choose both`},
		{head + "    tier_from: descriptor:tier\n    default_tier: free\n" + tiers,
			`serve: policy 1 ("plan"): tier_from: match has no entry "tier" (api_key=*, plan=*)`},
		{"policies:\n  - name: plan\n    match: [{key: api_key}, {key: plan, value: pro}]\n    tier_from: descriptor:plan\n    default_tier: free\n" + tiers,
			`serve: policy 1 ("plan"): tier_from: match's entry "plan" has the value "pro"`},
		{head + "    tier_from: header:X-Plan\n    default_tier: free\n" + tiers,
			`serve: policy 1 ("plan"): tier_from: unknown "header:X-Plan"`},
		{head + "    algorithm: fixedwindow\n    tier_from: descriptor:plan\n    default_tier: free\n" + tiers,
			`serve: policy 1 ("plan"): tier "free": burst: 10, but fixedwindow has no burst`},
		{head + "    cost: 11\n    tier_from: descriptor:plan\n    default_tier: pro\n" + tiers,
			`serve: policy 1 ("plan"): tier "free": cost: 11 can never be allowed: the limit's capacity is 10`},
		{head + "    cost: 5\n    shards: 4\n    tier_from: descriptor:plan\n    default_tier: pro\n" + tiers,
			`serve: policy 1 ("plan"): tier "free": cost: 5 can never be allowed on a sharded key`},
		{head + "    rate: 60\n    period: 1m\n    tier_from: descriptor:plan\n    default_tier: free\n" + tiers,
			`serve: policy 1 ("plan"): rate, period, burst: a policy with tiers has the limits of its tiers`},
		{head + "    default_tier: free\n" + tiers, `serve: policy 1 ("plan"): tier_from: none given`},
		{head + "    tier_from: descriptor:plan\n    rate: 60\n    period: 1m\n", `serve: policy 1 ("plan"): tiers: none given`},
		{head + "    tier_from: descriptor:plan\n    default_tier: free\n    tiers: {free: {rate: 60, period: 1m, colour: red}}\n",
			"field colour not found in type httplimit.FileTier"},
		{head + "    tier_from: descriptor:plan\n    default_tier: free\n    tiers: {free: {rate: 60, period: 1m}, free: {rate: 6, period: 1m}}\n",
			`mapping key "free" already defined`},
	} {
		_, err := serve.New([]byte(c.file), newMemStore(t), nil, nil)
		require.ErrorContains(t, err, c.want, c.file)
	}
	srv, err := serve.New([]byte(plansPolicies), newMemStore(t), nil, nil)
	require.NoError(t, err, "the policy the cases above break")
	require.NoError(t, srv.Close())
}
