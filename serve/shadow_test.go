package serve_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice/serve"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memstore"
)

// lockedBuffer is a log destination the servers' goroutines write to and
// the test reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines decodes the JSON log lines whose msg is msg.
func (b *lockedBuffer) lines(t *testing.T, msg string) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func shadowPolicies(shadow bool) string {
	return "domain: edge\npolicies:\n  - {name: per-user, match: [{key: user}], algorithm: fixedwindow, rate: 2, period: 1m, shadow: " +
		map[bool]string{true: "true", false: "false"}[shadow] + "}\n"
}

// shadowDecisions sums sluice.decisions of outcome by sluice.shadow
// ("shadow" or "none").
func shadowDecisions(t *testing.T, reader *sdkmetric.ManualReader, outcome string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(t.Context(), &rm))
	counts := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "sluice.decisions" {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if o, _ := p.Attributes.Value("sluice.outcome"); o.AsString() != outcome {
					continue
				}
				tag := "none"
				if v, ok := p.Attributes.Value("sluice.shadow"); ok && v.AsBool() {
					tag = "shadow"
				}
				counts[tag] += p.Value
			}
		}
	}
	return counts
}

// TestShadowPolicyAtItsLimitAnswersOK: a shadow policy of 2 a minute
// answers a third hit OK over gRPC, with no limit, remaining or reset in
// its status and no header to add, and POST /v1/allow answers a third
// request allowed with "shadow_denied": true and no RateLimit fields; each
// would-be denial is logged with the policy and the descriptor and counted
// as a denied decision with sluice.shadow=true; the store counted every
// hit: the same policy enforced on the same store denies both keys.
// shadow: false denies the third hits, as before, with Retry-After.
func TestShadowPolicyAtItsLimitAnswersOK(t *testing.T) {
	for _, shadow := range []bool{true, false} {
		t.Run(map[bool]string{true: "shadow", false: "enforced"}[shadow], func(t *testing.T) {
			store := newMemStore(t, memstore.WithClock(sluicetest.NewFakeClock(time.Unix(1_700_000_000, 0))))
			reader := sdkmetric.NewManualReader()
			registry := prometheus.NewRegistry()
			exporter, err := otelprom.New(otelprom.WithRegisterer(registry))
			require.NoError(t, err)
			logs := &lockedBuffer{}
			srv, err := serve.New([]byte(shadowPolicies(shadow)), store,
				sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithReader(exporter)),
				slog.New(slog.NewJSONHandler(logs, nil)))
			require.NoError(t, err)
			t.Cleanup(func() { _ = srv.Close() })
			rls := startRLS(t, srv)
			web := httptest.NewServer(srv.Handler(nil))
			t.Cleanup(web.Close)

			var grpcCodes []rlsv3.RateLimitResponse_Code
			var last *rlsv3.RateLimitResponse
			for range 3 {
				last = ask(t, rls, descriptor("user", "u1"))
				grpcCodes = append(grpcCodes, last.GetOverallCode())
			}
			var answers []serve.AllowResponse
			var lastHTTP *http.Response
			for range 3 {
				resp, body := post(t, web.URL+"/v1/allow", `{"policy": "per-user", "key": "u2"}`)
				require.Equal(t, http.StatusOK, resp.StatusCode, body)
				var a serve.AllowResponse
				require.NoError(t, json.Unmarshal([]byte(body), &a))
				answers = append(answers, a)
				lastHTTP = resp
			}
			denials := logs.lines(t, serve.ShadowDenialMessage)

			if !shadow {
				require.Equal(t, []rlsv3.RateLimitResponse_Code{ok, ok, over}, grpcCodes)
				require.Equal(t, "per-user", last.GetStatuses()[0].GetCurrentLimit().GetName())
				require.Contains(t, headerKeys(last), "Retry-After")
				require.False(t, answers[2].Allowed)
				require.False(t, answers[2].ShadowDenied)
				require.NotEmpty(t, lastHTTP.Header.Get("RateLimit"))
				require.Empty(t, denials)
				require.Equal(t, map[string]int64{"none": 2}, shadowDecisions(t, reader, "denied"))
				return
			}
			require.Equal(t, []rlsv3.RateLimitResponse_Code{ok, ok, ok}, grpcCodes, "a shadow policy never denies")
			st := last.GetStatuses()[0]
			require.Equal(t, ok, st.GetCode())
			require.Nil(t, st.GetCurrentLimit(), "no limit Envoy could turn into headers")
			require.Zero(t, st.GetLimitRemaining())
			require.Nil(t, st.GetDurationUntilReset())
			require.Empty(t, headerKeys(last), "no RateLimit, RateLimit-Policy or Retry-After for a shadow policy")

			require.Equal(t, serve.AllowResponse{Allowed: true, Remaining: 0, ResetAfterMs: answers[2].ResetAfterMs,
				Source: "store", ShadowDenied: true}, answers[2])
			require.Positive(t, answers[2].ResetAfterMs)
			require.False(t, answers[1].ShadowDenied)
			for _, name := range []string{"RateLimit", "RateLimit-Policy", "Retry-After"} {
				require.Empty(t, lastHTTP.Header.Values(name), name)
			}

			require.Len(t, denials, 2, "one line per would-be denial")
			require.Equal(t, "per-user", denials[0]["policy"])
			require.Equal(t, "user=u1", denials[0]["descriptor"])
			require.Equal(t, "grpc", denials[0]["via"])
			require.Equal(t, "user=u2", denials[1]["descriptor"])
			require.Equal(t, "http", denials[1]["via"])
			require.Equal(t, "INFO", denials[0]["level"])
			require.Equal(t, map[string]int64{"shadow": 2}, shadowDecisions(t, reader, "denied"))
			require.Equal(t, map[string]int64{"shadow": 4}, shadowDecisions(t, reader, "allowed"))
			rec := httptest.NewRecorder()
			srv.Handler(promhttp.HandlerFor(registry, promhttp.HandlerOpts{})).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			var exposed string
			for _, line := range strings.Split(rec.Body.String(), "\n") {
				if strings.HasPrefix(line, "sluice_decisions_total{") && strings.Contains(line, `sluice_outcome="denied"`) {
					exposed = line
				}
			}
			require.Contains(t, exposed, `sluice_shadow="true"`, rec.Body.String())
			require.True(t, strings.HasSuffix(exposed, " 2"), exposed)

			// Counted: the same policy, enforced, on the same store denies.
			enforced, err := serve.New([]byte(shadowPolicies(false)), store, nil, nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = enforced.Close() })
			require.Equal(t, over, ask(t, startRLS(t, enforced), descriptor("user", "u1")).GetOverallCode())
			eweb := httptest.NewServer(enforced.Handler(nil))
			t.Cleanup(eweb.Close)
			_, body := post(t, eweb.URL+"/v1/allow", `{"policy": "per-user", "key": "u2"}`)
			var a serve.AllowResponse
			require.NoError(t, json.Unmarshal([]byte(body), &a))
			require.False(t, a.Allowed, "the shadow policy's requests were counted")
		})
	}
}

func headerKeys(resp *rlsv3.RateLimitResponse) []string {
	var keys []string
	for _, h := range resp.GetResponseHeadersToAdd() {
		keys = append(keys, h.GetKey())
	}
	return keys
}

// TestShadowPolicyStoreErrorAnswersOK: with the store down, a shadow
// policy's descriptor is answered OK over gRPC (not UNAVAILABLE) and the
// error logged, with the descriptor's long value as its SHA-256; POST
// /v1/allow still answers 503, having no decision.
func TestShadowPolicyStoreErrorAnswersOK(t *testing.T) {
	logs := &lockedBuffer{}
	srv, err := serve.New([]byte(shadowPolicies(true)), downStore{}, nil, slog.New(slog.NewJSONHandler(logs, nil)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	resp := ask(t, startRLS(t, srv), descriptor("user", strings.Repeat("x", 100)))
	require.Equal(t, ok, resp.GetOverallCode())
	require.Empty(t, headerKeys(resp))
	errs := logs.lines(t, "serve: shadow policy: no decision; the descriptor is allowed")
	require.Len(t, errs, 1)
	require.Equal(t, "per-user", errs[0]["policy"])
	require.True(t, strings.HasPrefix(errs[0]["descriptor"].(string), "user=sha256:"), errs[0]["descriptor"])

	web := httptest.NewServer(srv.Handler(nil))
	t.Cleanup(web.Close)
	httpResp, body := post(t, web.URL+"/v1/allow", `{"policy": "per-user", "key": "u1"}`)
	require.Equal(t, http.StatusServiceUnavailable, httpResp.StatusCode, body)
}
