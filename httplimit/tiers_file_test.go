package httplimit_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/store/memstore"
)

// TestTiersByKeyPrefix: tier_from: key-prefix chooses the tier whose
// prefix starts the key as the key function derives it, the default tier
// when none does (a header over 64 bytes, keyed by its SHA-256,
// included); the same file in JSON.
func TestTiersByKeyPrefix(t *testing.T) {
	for name, file := range map[string]string{
		"yaml": `
policies:
  - name: plan
    key: header:X-API-Key
    tier_from: key-prefix
    default_tier: free
    tiers:
      free: {rate: 60, period: 1m, burst: 10}
      pro: {rate: 6000, period: 1m, burst: 500, values: [pk_, team_]}
`,
		"json": `{"policies": [{"name": "plan", "key": "header:X-API-Key", "tier_from": "key-prefix", "default_tier": "free",
  "tiers": {"free": {"rate": 60, "period": "1m", "burst": 10},
            "pro": {"rate": 6000, "period": "1m", "burst": 500, "values": ["pk_", "team_"]}}}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			h := plansHandler(t, file)
			longKey := "pk_" + strings.Repeat("x", 70) // over 64 bytes: keyed by its SHA-256, which pk_ does not start
			for key, want := range map[string]string{"pk_123": "q=500", "team_9": "q=500", "sk_123": "q=10", "xpk_1": "q=10", longKey: "q=10"} {
				w := call(h, http.MethodGet, "/items", key, "")
				require.Equal(t, http.StatusOK, w.Code)
				require.Contains(t, w.Header().Get("RateLimit-Policy"), want, key)
			}
		})
	}
}

// TestRouteCostsWithoutTiers: a policy of one limit with a cost table
// charges every route to the one budget: the most specific pattern's
// cost, Cost for a route in none.
func TestRouteCostsWithoutTiers(t *testing.T) {
	h := plansHandler(t, `
policies:
  - name: budget
    key: header:X-API-Key
    rate: 20
    period: 1h
    cost: 2
    costs:
      - {route: "/reports/", cost: 5}
      - {route: "POST /reports/{id}", cost: 10}
`)
	for _, c := range []struct {
		method, path string
		code         int
		r            string
	}{
		{http.MethodGet, "/items", 200, "r=18"},       // cost: 2
		{http.MethodGet, "/reports/7", 200, "r=13"},   // "/reports/": 5
		{http.MethodPost, "/reports/7", 200, "r=3"},   // the more specific "POST /reports/{id}": 10
		{http.MethodPost, "/reports/7/x", 429, "r=3"}, // "/reports/": 5, more than the 3 left
		{http.MethodGet, "/items", 200, "r=1"},        // 2 of the 3
	} {
		w := call(h, c.method, c.path, "k", "")
		require.Equal(t, c.code, w.Code, "%s %s", c.method, c.path)
		require.Contains(t, w.Header().Get("RateLimit"), c.r, "%s %s", c.method, c.path)
	}
}

// TestDecoratorsApplyToEveryTier: a tiered policy's decorators serve every
// tier with that tier's limit: with the store down, fallback: local
// enforces the free tier's burst of 3 and the pro tier's 6, in process;
// tracing records every decision of both under the policy's name.
func TestDecoratorsApplyToEveryTier(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	policies, err := httplimit.Load([]byte(`
policies:
  - name: plan
    key: header:X-API-Key
    tier_from: header:X-Plan
    default_tier: free
    tiers:
      free: {rate: 1, period: 1h, burst: 3}
      pro: {rate: 2, period: 1h, burst: 6}
    coalesce: true
    deny_cache: true
    fallback: local
    replicas: 1
    tracing: true
`), downStore{}, stack.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))))
	require.NoError(t, err)
	t.Cleanup(func() { _ = policies.Close() })
	require.Equal(t, []string{"sluiceotel", "fallback", "denycache", "coalesce", "tokenbucket"},
		policies[0].Limiter.(*stack.Stack).Layers())
	h := newHandler(t, policies)

	n, denial := allowedInARow(t, h, http.MethodGet, "/items", "k", "", 3)
	require.Equal(t, 3, n, "the free tier's burst, enforced locally")
	require.Contains(t, denial.Body.String(), "decided by this server alone")
	n, _ = allowedInARow(t, h, http.MethodGet, "/items", "k", "pro", 6)
	require.Equal(t, 6, n, "the pro tier's burst, enforced locally")
	got := spans.GetSpans()
	require.Len(t, got, 11, "every decision of both tiers traced")
	for _, s := range got {
		require.Contains(t, s.Attributes, attribute.String("sluice.policy", "plan"))
	}
}

// TestShadowTieredPolicy: a tiered policy in shadow mode decides and
// counts each tier, never denies, tells the client nothing, and logs a
// would-be denial with its tier.
func TestShadowTieredPolicy(t *testing.T) {
	clock := sluicetest.NewFakeClock(time.Unix(1_700_000_000, 0))
	policies, err := httplimit.Load([]byte(plansFile+"    shadow: true\n"), newMemStore(t, memstore.WithClock(clock)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = policies.Close() })
	var logs bytes.Buffer
	h := newHandler(t, policies, httplimit.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	for range 11 {
		w := call(h, http.MethodGet, "/items", "k", "")
		require.Equal(t, http.StatusOK, w.Code)
		for _, name := range limitingHeaders {
			require.Empty(t, w.Header().Values(name), name)
		}
	}
	require.Equal(t, http.StatusOK, call(h, http.MethodGet, "/items", "k", "pro").Code)
	denials := logLines(t, &logs, httplimit.ShadowDenialMessage)
	require.Len(t, denials, 1, "the 11th free request; the pro tier counts apart: %s", logs.String())
	require.Equal(t, "free", denials[0]["tier"])
	require.Equal(t, "plan", denials[0]["policy"])
}
