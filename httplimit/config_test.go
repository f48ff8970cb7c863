package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/stack"
)

const yamlPolicies = `
policies:
  - name: per-ip
    rate: 100
    period: 1m
  - name: orders
    algorithm: slidingcounter
    rate: 2
    period: 1m
    routes: ["POST /orders"]
    coalesce: true
  - name: search
    algorithm: gcra
    rate: 3
    period: 1s
    burst: 3
    cost: 3
    key: "header:X-API-Key"
    routes: ["GET /search"]
`

const jsonPolicies = `{"policies": [
  {"name": "orders", "algorithm": "fixedwindow", "rate": 2, "period": "1m", "routes": ["POST /orders"]}
]}`

func TestPolicyFiles(t *testing.T) {
	for name, data := range map[string]string{"yaml": yamlPolicies, "json": jsonPolicies} {
		t.Run(name, func(t *testing.T) {
			policies, err := httplimit.Load([]byte(data), newMemStore(t))
			require.NoError(t, err)
			mw, err := httplimit.Middleware(policies)
			require.NoError(t, err)
			srv := httptest.NewServer(mw(ok))
			t.Cleanup(srv.Close)

			post := func() int {
				resp, err := http.Post(srv.URL+"/orders", "text/plain", nil)
				require.NoError(t, err)
				_ = resp.Body.Close()
				return resp.StatusCode
			}
			require.Equal(t, []int{200, 200, 429}, []int{post(), post(), post()}, "2 orders a minute")
			resp := get(t, srv.URL+"/elsewhere", nil)
			require.Equal(t, http.StatusOK, resp.StatusCode, "the orders policy applies to its route only")
			if name == "yaml" {
				require.Equal(t, []string{`"per-ip";q=100;w=60`}, resp.Header.Values("RateLimit-Policy"))
				resp = get(t, srv.URL+"/search", map[string]string{"X-API-Key": "k"})
				require.Equal(t, http.StatusOK, resp.StatusCode)
				require.Equal(t, []string{`"per-ip";q=100;w=60`, `"search";q=3;w=1`}, resp.Header.Values("RateLimit-Policy"))
				resp = get(t, srv.URL+"/search", map[string]string{"X-API-Key": "k"})
				require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "cost 3 of a burst of 3")
			}
		})
	}
}

func TestCoalescedPolicies(t *testing.T) {
	policies, err := httplimit.Load([]byte(yamlPolicies), newMemStore(t))
	require.NoError(t, err)
	require.Len(t, policies, 3)
	for _, p := range policies {
		coalesced := slices.Contains(p.Limiter.(*stack.Stack).Layers(), "coalesce")
		require.Equal(t, p.Name == "orders", coalesced, "policy %s", p.Name)
	}
}

func TestBadPolicyFiles(t *testing.T) {
	for name, data := range map[string]string{
		"empty":             ``,
		"no policies":       `policies: []`,
		"unknown field":     `policies: [{name: a, rate: 1, period: 1s, colour: red}]`,
		"unknown algorithm": `policies: [{name: a, algorithm: magic, rate: 1, period: 1s}]`,
		"bad period":        `policies: [{name: a, rate: 1, period: soon}]`,
		"bad rate":          `policies: [{name: a, rate: 0, period: 1s}]`,
		"bad key":           `policies: [{name: a, rate: 1, period: 1s, key: "cookie:x"}]`,
		"bad route":         `policies: [{name: a, rate: 1, period: 1s, routes: ["GET"]}]`,
		"bad coalesce":      `policies: [{name: a, rate: 1, period: 1s, coalesce: maybe}]`,
		"not yaml":          `{{{`,
	} {
		_, err := httplimit.Load([]byte(data), newMemStore(t))
		require.Error(t, err, name)
	}
}

// TestEveryStackFeatureInAPolicyFile: a policy file declares every layer
// package stack builds (fallback included), and a cost that a share or a
// fallback's local share can never allow is refused at load, naming the
// policy and the field.
func TestEveryStackFeatureInAPolicyFile(t *testing.T) {
	policies, err := httplimit.Load([]byte(`
policies:
  - name: tenants
    key: "header:X-Tenant"
    rate: 400
    period: 1m
    coalesce: true
    lease: 20
    shards: 4
    hot_keys: [tenant-42]
    deny_cache: true
    fallback: local
    fallback_timeout: 50ms
    replicas: 3
    tracing: true
`), newMemStore(t))
	require.NoError(t, err)
	require.Equal(t, []string{"sluiceotel", "fallback", "denycache", "shard", "lease", "coalesce", "tokenbucket"},
		policies[0].Limiter.(*stack.Stack).Layers())
	srv := newServer(t, policies)
	resp := get(t, srv.URL, map[string]string{"X-Tenant": "tenant-42"})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, policies.Close())

	for _, c := range []struct{ file, want string }{
		{`policies: [{name: hot, rate: 10, period: 1m, shards: 4, cost: 3}]`,
			`httplimit: policy 1 ("hot"): cost: 3 can never be allowed on a sharded key`},
		{`policies: [{name: down, rate: 10, period: 1m, fallback: local, replicas: 4, cost: 3}]`,
			`httplimit: policy 1 ("down"): cost: 3 can never be allowed while the store fails`},
		{`policies: [{name: w, algorithm: fixedwindow, rate: 10, period: 1m, lease: 5}]`,
			`httplimit: policy 1 ("w"): lease: lease: sluice: the wrapped limiter does not support this`},
		{`{"policies": [{"name": "j", "rate": 10, "period": "1m", "shards": 2.5}]}`,
			`httplimit: parse policies: policy 1 ("j"): shards: "2.5" is not a whole number (line 1)`},
	} {
		_, err := httplimit.Load([]byte(c.file), newMemStore(t))
		require.ErrorContains(t, err, c.want)
	}
}
