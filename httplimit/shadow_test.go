package httplimit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/store/memstore"
)

// limitingHeaders are every field by which the middleware tells a client
// about a limit.
var limitingHeaders = []string{"RateLimit", "RateLimit-Policy", "Retry-After",
	"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}

func shadowFile(shadow bool) string {
	return `
policies:
  - name: per-ip
    algorithm: fixedwindow
    rate: 2
    period: 1m
    tracing: true
    shadow: ` + map[bool]string{true: "true", false: "false"}[shadow] + "\n"
}

// logLines decodes the JSON lines of buf whose msg is msg.
func logLines(t *testing.T, buf *bytes.Buffer, msg string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		if m["msg"] == msg {
			lines = append(lines, m)
		}
	}
	return lines
}

// TestShadowPolicyAtItsLimitLetsRequestsThrough: a shadow policy of 2 a
// minute lets a third request through with none of the limiting fields,
// logs the would-be denial with the policy and the key, records it with
// sluice.shadow=true on the span and the decision metric, and counts every
// request in the store as the enforced policy does: the same policy,
// enforced, on the same store, denies the next request. shadow: false
// denies the third, as before, with no shadow log line or attribute.
func TestShadowPolicyAtItsLimitLetsRequestsThrough(t *testing.T) {
	for _, shadow := range []bool{true, false} {
		t.Run(map[bool]string{true: "shadow", false: "enforced"}[shadow], func(t *testing.T) {
			clock := sluicetest.NewFakeClock(time.Unix(1_700_000_000, 0))
			store := newMemStore(t, memstore.WithClock(clock))
			spans := tracetest.NewInMemoryExporter()
			reader := sdkmetric.NewManualReader()
			policies, err := httplimit.Load([]byte(shadowFile(shadow)), store,
				stack.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))),
				stack.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
			require.NoError(t, err)
			t.Cleanup(func() { _ = policies.Close() })
			require.Equal(t, shadow, policies[0].Shadow)
			var logs bytes.Buffer
			mw, err := httplimit.Middleware(policies, httplimit.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
			require.NoError(t, err)
			h := mw(ok)

			var codes []int
			var last *httptest.ResponseRecorder
			for range 3 {
				last = httptest.NewRecorder()
				h.ServeHTTP(last, httptest.NewRequest(http.MethodGet, "/items", nil))
				codes = append(codes, last.Code)
			}
			denials := logLines(t, &logs, httplimit.ShadowDenialMessage)
			if !shadow {
				require.Equal(t, []int{200, 200, 429}, codes)
				require.NotEmpty(t, last.Header().Get("Retry-After"))
				require.Equal(t, []string{`"per-ip";q=2;w=60`}, last.Header().Values("RateLimit-Policy"))
				require.Empty(t, denials)
			} else {
				require.Equal(t, []int{200, 200, 200}, codes, "a shadow policy never denies")
				require.Equal(t, "ok", last.Body.String())
				for _, name := range limitingHeaders {
					require.Empty(t, last.Header().Values(name), "%s tells the client of a shadow policy", name)
				}
				require.Len(t, denials, 1, "one line per would-be denial: %s", logs.String())
				require.Equal(t, "per-ip", denials[0]["policy"])
				require.Equal(t, "192.0.2.1", denials[0]["key"], "httptest's client address")
				require.Equal(t, "INFO", denials[0]["level"])
				require.Equal(t, "/items", denials[0]["path"])
			}

			// The span of the third decision, and the decision metric.
			got := spans.GetSpans()
			require.Len(t, got, 3)
			a := attrs(got[2].Attributes)
			require.Equal(t, "denied", a["sluice.outcome"])
			if shadow {
				require.Equal(t, true, a["sluice.shadow"])
			} else {
				require.NotContains(t, a, "sluice.shadow")
			}
			require.Equal(t, map[string]int64{"denied/" + map[bool]string{true: "shadow", false: "none"}[shadow]: 1,
				"allowed/" + map[bool]string{true: "shadow", false: "none"}[shadow]: 2}, decisionCounts(t, reader))

			// The store counted every request: the policy enforced on the same
			// store and key denies.
			enforced, err := httplimit.Load([]byte(shadowFile(false)), store)
			require.NoError(t, err)
			t.Cleanup(func() { _ = enforced.Close() })
			emw, err := httplimit.Middleware(enforced)
			require.NoError(t, err)
			rec := httptest.NewRecorder()
			emw(ok).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/items", nil))
			require.Equal(t, http.StatusTooManyRequests, rec.Code, "the shadow policy's requests were counted")
		})
	}
}

// TestShadowPolicyIsInvisibleBesideAnEnforcedOne: beside an enforced
// policy, a shadow policy adds nothing to the headers, allowed or not, and
// does not stop the enforced policy from deciding; a request it cannot key
// goes on, logged.
func TestShadowPolicyIsInvisibleBesideAnEnforcedOne(t *testing.T) {
	store := newMemStore(t, memstore.WithClock(sluicetest.NewFakeClock(time.Unix(1_700_000_000, 0))))
	var logs bytes.Buffer
	mw, err := httplimit.Middleware([]httplimit.Policy{
		{Name: "dry-run", Limiter: newBucket(t, store), Limit: sluice.PerMinute(1), Shadow: true, Key: httplimit.Header("X-API-Key")},
		{Name: "per-ip", Limiter: newBucket(t, store), Limit: sluice.PerMinute(100)},
	}, httplimit.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	require.NoError(t, err)
	h := mw(ok)
	for i, apiKey := range []string{"k", "k", ""} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		if apiKey != "" {
			req.Header.Set("X-API-Key", apiKey)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, "request %d", i)
		require.Equal(t, []string{`"per-ip";q=100;w=60`}, rec.Header().Values("RateLimit-Policy"), "request %d", i)
		require.Len(t, rec.Header().Values("RateLimit"), 1, "request %d", i)
		require.NotContains(t, rec.Header().Get("RateLimit"), "dry-run")
		require.Equal(t, "100", rec.Header().Get("X-RateLimit-Limit"), "the enforced policy's figures")
		require.Empty(t, rec.Header().Get("Retry-After"))
	}
	denials := logLines(t, &logs, httplimit.ShadowDenialMessage)
	require.Len(t, denials, 1)
	require.Equal(t, "dry-run", denials[0]["policy"])
	require.Equal(t, "k", denials[0]["key"])
	noKey := logLines(t, &logs, "httplimit: shadow policy: no key; the request goes on")
	require.Len(t, noKey, 1)
	require.Equal(t, "ERROR", noKey[0]["level"])
}

// decisionCounts sums sluice.decisions by outcome and shadow ("shadow" or
// "none").
func decisionCounts(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
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
				outcome, _ := p.Attributes.Value("sluice.outcome")
				tag := "none"
				if v, ok := p.Attributes.Value("sluice.shadow"); ok && v.AsBool() {
					tag = "shadow"
				}
				counts[outcome.AsString()+"/"+tag] += p.Value
			}
		}
	}
	return counts
}

func newBucket(t *testing.T, store sluice.Store) sluice.Limiter {
	t.Helper()
	l, err := tokenbucket.New(store)
	require.NoError(t, err)
	return l
}

func attrs(kvs []attribute.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

// scripted answers every decision with d, err.
type scripted struct {
	d   sluice.Decision
	err error
}

func (s scripted) AllowN(context.Context, string, sluice.Limit, int64) (sluice.Decision, error) {
	return s.d, s.err
}

// TestShadowPolicyNeverFailsARequest: under a shadow policy, a denial by a
// Closed fallback is not a 503, a limiter error not a 503 and a key
// function that cannot work not a 500: each request goes on, the errors
// logged at Error, and no limiting field is sent.
func TestShadowPolicyNeverFailsARequest(t *testing.T) {
	for name, p := range map[string]httplimit.Policy{
		"closed fallback": {Limiter: scripted{d: sluice.Decision{Source: sluice.SourceFallbackClosed, RetryAfter: time.Second}}},
		"limiter error":   {Limiter: scripted{err: errors.New("connection refused")}},
		"misconfigured key": {Limiter: scripted{d: sluice.Decision{Allowed: true}},
			Key: func(*http.Request) (string, error) { return "", httplimit.ErrKeyMisconfigured }},
	} {
		t.Run(name, func(t *testing.T) {
			p.Name, p.Limit, p.Shadow = "dry-run", sluice.PerMinute(10), true
			var logs bytes.Buffer
			mw, err := httplimit.Middleware([]httplimit.Policy{p}, httplimit.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
			require.NoError(t, err)
			rec := httptest.NewRecorder()
			mw(ok).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			require.Equal(t, http.StatusOK, rec.Code)
			for _, h := range limitingHeaders {
				require.Empty(t, rec.Header().Values(h), h)
			}
			if name == "closed fallback" {
				require.Len(t, logLines(t, &logs, httplimit.ShadowDenialMessage), 1)
				return
			}
			require.Contains(t, logs.String(), `"level":"ERROR"`)
			require.Contains(t, logs.String(), `"policy":"dry-run"`)
		})
	}
}
