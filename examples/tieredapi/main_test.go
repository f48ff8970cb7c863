package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sluicehq/sluice/sluiceotel"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/goredisstore"
)

// service is the example on a throwaway redis-server, its token bucket on
// a clock that stands still (so that no token comes back while a test
// spends a burst), its spans in memory.
type service struct {
	url      string
	redis    *redistest.RedisServer
	accounts *accounts
	spans    *tracetest.InMemoryExporter
}

// startService starts redis-server (the test skips without it, and fails
// under SLUICE_REQUIRE_REDIS=1) and the service on it.
func startService(t *testing.T) *service {
	t.Helper()
	server := redistest.StartRedis(t)
	client := redis.NewClient(&redis.Options{Addr: server.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	store, err := goredisstore.New(client)
	require.NoError(t, err)
	svc := &service{redis: server, accounts: demoAccounts(), spans: tracetest.NewInMemoryExporter()}
	h, err := newHandler(store, svc.accounts, deps{
		clock:   sluicetest.NewFakeClock(time.Unix(1_700_000_000, 0)),
		tracing: []sluiceotel.Option{sluiceotel.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(svc.spans)))},
	})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	svc.url = srv.URL
	return svc
}

func (s *service) do(t *testing.T, method, path, key string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, s.url+path, nil)
	require.NoError(t, err)
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return resp
}

// burst counts the requests allowed before the first 429 (at most max+1
// are sent), and returns the 429.
func (s *service) burst(t *testing.T, method, path, key string, max int) (int, *http.Response) {
	t.Helper()
	for i := range max + 1 {
		resp := s.do(t, method, path, key)
		if resp.StatusCode == http.StatusTooManyRequests {
			return i, resp
		}
		require.Less(t, resp.StatusCode, 300, "%s %s", method, path)
	}
	t.Fatalf("%d requests allowed in a row, more than %d", max+1, max)
	return 0, nil
}

// TestFreeAndProPlans: on Redis, a free key gets its burst of 10 GET
// /items and then a 429 whose fields state the free plan's limit; a pro
// key gets 500 and the pro plan's fields.
func TestFreeAndProPlans(t *testing.T) {
	svc := startService(t)

	n, denial := svc.burst(t, http.MethodGet, "/items", "free-1", 10)
	require.Equal(t, 10, n, "the free burst")
	require.Equal(t, []string{`"plan";q=10;w=10`}, denial.Header.Values("RateLimit-Policy"), "10 at once, refilled in 10 s")
	require.Equal(t, `"plan";r=0;t=1`, denial.Header.Get("RateLimit"))
	require.Equal(t, "1", denial.Header.Get("Retry-After"), "a token a second")
	require.Equal(t, "10", denial.Header.Get("X-RateLimit-Limit"))

	n, denial = svc.burst(t, http.MethodGet, "/items", "pro-1", 500)
	require.Equal(t, 500, n, "the pro burst")
	require.Equal(t, []string{`"plan";q=500;w=5`}, denial.Header.Values("RateLimit-Policy"), "500 at once, refilled in 5 s")
	require.Equal(t, "500", denial.Header.Get("X-RateLimit-Limit"))

	require.Equal(t, http.StatusUnauthorized, svc.do(t, http.MethodGet, "/items", "made-up").StatusCode)
}

// TestAReportSpendsTenOfTheSameBudget: POST /reports and GET /items draw
// on one budget per key, 10 and 1.
func TestAReportSpendsTenOfTheSameBudget(t *testing.T) {
	svc := startService(t)

	require.Equal(t, `"plan";r=499;t=1`, svc.do(t, http.MethodGet, "/items", "pro-1").Header.Get("RateLimit"))
	resp := svc.do(t, http.MethodPost, "/reports", "pro-1")
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.Equal(t, `"plan";r=489;t=1`, resp.Header.Get("RateLimit"))
	require.Equal(t, `"plan";r=488;t=1`, svc.do(t, http.MethodGet, "/items", "pro-1").Header.Get("RateLimit"))

	resp = svc.do(t, http.MethodPost, "/reports", "free-2")
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.Equal(t, `"plan";r=0;t=1`, resp.Header.Get("RateLimit"), "one report spends the whole free burst")
	require.Equal(t, http.StatusTooManyRequests, svc.do(t, http.MethodGet, "/items", "free-2").StatusCode)
}

// TestPlansNeverShareState: an account upgraded from free to pro starts on
// the pro plan's full burst, whatever it spent as free; moved back, it
// finds its free state as it left it.
func TestPlansNeverShareState(t *testing.T) {
	svc := startService(t)

	n, _ := svc.burst(t, http.MethodGet, "/items", "free-1", 10)
	require.Equal(t, 10, n)
	svc.accounts.setPlan("free-1", "pro")
	resp := svc.do(t, http.MethodGet, "/items", "free-1")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, `"plan";r=499;t=1`, resp.Header.Get("RateLimit"), "the pro state is its own")
	svc.accounts.setPlan("free-1", "free")
	require.Equal(t, http.StatusTooManyRequests, svc.do(t, http.MethodGet, "/items", "free-1").StatusCode,
		"the free state is still spent")
}

// TestRedisDownAndTracing: every decision is traced under the policy's
// name; with Redis gone, the fallback lets requests through (Open), with
// no figures of the shared limit in the fields, and the spans say so.
func TestRedisDownAndTracing(t *testing.T) {
	svc := startService(t)
	require.Equal(t, http.StatusOK, svc.do(t, http.MethodGet, "/items", "pro-1").StatusCode)

	svc.redis.Kill()
	for range 3 {
		resp := svc.do(t, http.MethodPost, "/reports", "free-1")
		require.Equal(t, http.StatusAccepted, resp.StatusCode, "Open: requests go through while Redis is down")
		require.Equal(t, []string{`"plan";q=10;w=10`}, resp.Header.Values("RateLimit-Policy"))
		require.Empty(t, resp.Header.Values("RateLimit"), "no figures of a limit that could not be read")
	}

	spans := svc.spans.GetSpans()
	require.Len(t, spans, 4)
	for i, s := range spans {
		require.Contains(t, s.Attributes, attribute.String("sluice.policy", "plan"))
		require.Contains(t, s.Attributes, attribute.String("sluice.algorithm", "tokenbucket"))
		source := "store"
		if i > 0 {
			source = "fallback-open"
		}
		require.Contains(t, s.Attributes, attribute.String("sluice.source", source), "span %d", i)
	}
}
