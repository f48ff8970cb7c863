package serve_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/serve"
)

func post(t *testing.T, url, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// TestAllowEndpoint: POST /v1/allow decides by a policy's name and a key,
// with the draft-10 fields; the key is the same as a one-entry
// descriptor's value, so gRPC and JSON callers share a limit. Bad requests
// are 400 and name what is wrong.
func TestAllowEndpoint(t *testing.T) {
	srv, err := serve.New([]byte("domain: edge\npolicies:\n  - {name: per-user, match: [{key: user}], rate: 3, period: 1m}\n"), newMemStore(t), nil, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	web := httptest.NewServer(srv.Handler(nil))
	t.Cleanup(web.Close)
	rls := startRLS(t, srv)

	resp, body := post(t, web.URL+"/v1/allow", `{"policy": "per-user", "key": "u1"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var d serve.AllowResponse
	require.NoError(t, json.Unmarshal([]byte(body), &d))
	require.Equal(t, serve.AllowResponse{Allowed: true, Remaining: 2, ResetAfterMs: d.ResetAfterMs, Source: "store"}, d)
	require.Equal(t, `"per-user";q=3;w=60`, resp.Header.Get("RateLimit-Policy"))
	require.Equal(t, `"per-user";r=2;t=20`, resp.Header.Get("RateLimit"))

	grpc := ask(t, rls, descriptor("user", "u1"))
	require.Equal(t, uint32(1), grpc.GetStatuses()[0].GetLimitRemaining(), "the descriptor user=u1 is the same key")

	_, body = post(t, web.URL+"/v1/allow", `{"policy": "per-user", "key": "u1", "cost": 1}`)
	require.NoError(t, json.Unmarshal([]byte(body), &d))
	require.True(t, d.Allowed)
	_, body = post(t, web.URL+"/v1/allow", `{"policy": "per-user", "key": "u1"}`)
	require.NoError(t, json.Unmarshal([]byte(body), &d))
	require.False(t, d.Allowed)
	require.Positive(t, d.RetryAfterMs)

	for _, bad := range []struct{ body, want string }{
		{`{"policy": "nope", "key": "u1"}`, "unknown"},
		{`{"policy": "per-user", "key": ""}`, "key"},
		{`{"policy": "per-user", "key": "u2", "cost": 4}`, "cost"},
		{`{"policy": "per-user", "key": "u2", "cost": -1}`, "cost"},
		{`{"policy": "per-user", "key": "u2", "colour": "red"}`, "colour"},
		{`not json`, "body"},
	} {
		resp, body := post(t, web.URL+"/v1/allow", bad.body)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, bad.body)
		require.Contains(t, body, bad.want, bad.body)
	}
	_, body = post(t, web.URL+"/v1/allow", `{"policy": "per-user", "key": "u2"}`)
	require.NoError(t, json.Unmarshal([]byte(body), &d))
	require.Equal(t, int64(2), d.Remaining, "the bad requests consumed nothing")
}

// downStore is a store whose Redis does not answer.
type downStore struct{}

func (downStore) Run(context.Context, *sluice.Script, []string, []int64) ([]int64, error) {
	return nil, errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
}

// TestReadiness: /healthz answers while the process runs; /readyz fails
// when the store does not answer and a policy cannot decide without it (a
// Closed fallback, or none), and passes when every policy has an Open or
// Local fallback, or the store answers.
func TestReadiness(t *testing.T) {
	get := func(h http.Handler, path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	for _, c := range []struct {
		name  string
		store sluice.Store
		file  string
		ready bool
	}{
		{"store answers", newMemStore(t), "policies:\n  - {name: p, match: [{key: u}], rate: 5, period: 1s, fallback: closed}\n", true},
		{"down, closed", downStore{}, "policies:\n  - {name: p, match: [{key: u}], rate: 5, period: 1s, fallback: closed}\n  - {name: q, match: [{key: v}], rate: 5, period: 1s, fallback: open}\n", false},
		{"down, no fallback", downStore{}, "policies:\n  - {name: p, match: [{key: u}], rate: 5, period: 1s}\n", false},
		{"down, open and local", downStore{}, "policies:\n  - {name: p, match: [{key: u}], rate: 5, period: 1s, fallback: open}\n  - {name: q, match: [{key: v}], rate: 6, period: 1s, fallback: local, replicas: 3}\n", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, err := serve.New([]byte(c.file), c.store, nil, nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = srv.Close() })
			h := srv.Handler(nil)
			code, _ := get(h, "/healthz")
			require.Equal(t, http.StatusOK, code)
			code, body := get(h, "/readyz")
			if c.ready {
				require.Equal(t, http.StatusOK, code, body)
			} else {
				require.Equal(t, http.StatusServiceUnavailable, code, body)
				require.Contains(t, body, `"p"`, "names the policy that cannot decide")
			}
		})
	}
}

// TestMetrics: /metrics (Prometheus exposition through the OpenTelemetry
// exporter) counts decisions by policy, source and outcome.
func TestMetrics(t *testing.T) {
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry))
	require.NoError(t, err)
	meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	t.Cleanup(func() { _ = meters.Shutdown(context.Background()) })
	srv, err := serve.New([]byte("domain: edge\npolicies:\n  - {name: per-user, match: [{key: user}], rate: 2, period: 1m}\n"), newMemStore(t), meters, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	rls := startRLS(t, srv)
	for range 3 {
		ask(t, rls, descriptor("user", "u1"))
	}
	rec := httptest.NewRecorder()
	srv.Handler(promhttp.HandlerFor(registry, promhttp.HandlerOpts{})).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	var allowed, denied string
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(line, "sluice_decisions_total{") && strings.Contains(line, `sluice_policy="per-user"`) && strings.Contains(line, `sluice_source="store"`) {
			switch {
			case strings.Contains(line, `sluice_outcome="allowed"`):
				allowed = line
			case strings.Contains(line, `sluice_outcome="denied"`):
				denied = line
			}
		}
	}
	require.True(t, strings.HasSuffix(allowed, " 2"), "2 allowed: %q", allowed)
	require.True(t, strings.HasSuffix(denied, " 1"), "1 denied: %q", denied)
}

// TestAllowDecidesOnlyWhereThePolicyMatches: POST /v1/allow decides under
// a policy only when the request is a descriptor the policy matches: a
// key its one entry's value allows, or, for a policy of several entries,
// "descriptor" entries that match it as a gRPC descriptor would (and
// count in the same key). A request that names a hot tenant's policy with
// another tenant's key is refused, not decided (and sharded) under it, and
// so is a descriptor an earlier policy matches first.
func TestAllowDecidesOnlyWhereThePolicyMatches(t *testing.T) {
	config := `domain: edge
policies:
  - {name: acme, match: [{key: tenant, value: acme}], rate: 100, period: 1m, shards: 4}
  - {name: per-tenant, match: [{key: tenant}], rate: 3, period: 1m}
  - {name: orders, match: [{key: user}, {key: path, value: /orders}], rate: 3, period: 1m}
`
	srv, err := serve.New([]byte(config), newMemStore(t), nil, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	web := httptest.NewServer(srv.Handler(nil))
	t.Cleanup(web.Close)
	rls := startRLS(t, srv)

	resp, body := post(t, web.URL+"/v1/allow", `{"policy": "acme", "key": "acme"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	for _, bad := range []struct{ body, want string }{
		{`{"policy": "acme", "key": "globex"}`, `key: "globex" does not match policy "acme" (tenant=acme)`},
		{`{"policy": "orders", "key": "alice"}`, `policy "orders" matches descriptors of 2 entries: give "descriptor"`},
		{`{"policy": "orders", "descriptor": [{"key": "user", "value": "alice"}, {"key": "path", "value": "/cart"}]}`,
			`descriptor: does not match policy "orders"`},
		{`{"policy": "orders", "descriptor": [{"key": "user", "value": "alice"}]}`, `descriptor: does not match policy "orders"`},
		{`{"policy": "orders", "key": "alice", "descriptor": [{"key": "user", "value": "alice"}, {"key": "path", "value": "/orders"}]}`,
			"give key or descriptor, not both"},
		// acme's key is matched by the policy listed first, as gRPC matches
		// it: it is not decided under the looser per-tenant policy.
		{`{"policy": "per-tenant", "key": "acme"}`, `tenant=acme is matched first by policy "acme"`},
	} {
		resp, body := post(t, web.URL+"/v1/allow", bad.body)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, bad.body)
		var e struct{ Error string }
		require.NoError(t, json.Unmarshal([]byte(body), &e))
		require.Contains(t, e.Error, bad.want, bad.body)
	}

	var d serve.AllowResponse
	resp, body = post(t, web.URL+"/v1/allow", `{"policy": "orders", "descriptor": [{"key": "user", "value": "alice"}, {"key": "path", "value": "/orders"}]}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.NoError(t, json.Unmarshal([]byte(body), &d))
	require.Equal(t, int64(2), d.Remaining)
	grpc := ask(t, rls, descriptor("user", "alice", "path", "/orders"))
	require.Equal(t, uint32(1), grpc.GetStatuses()[0].GetLimitRemaining(), "the same key as the gRPC descriptor")
}
