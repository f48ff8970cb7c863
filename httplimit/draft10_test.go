package httplimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/slidingcounter"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/httplimit"
)

// downStore is a store that is always down.
type downStore struct{}

func (downStore) Run(_ context.Context, _ *sluice.Script, _ []string, _ []int64) ([]int64, error) {
	return nil, errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
}

func problemBody(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	return body
}

// TestDegradedDecisionsSendNoInventedNumbers: a decision made by a fallback
// policy (the store down) carries the policy (its quota is configuration)
// but no RateLimit item and no X-RateLimit-Remaining or -Reset, since the
// shared limit's figures are unknown. A Closed fallback's denial is a 503
// whose body says the limiter is degraded, with the breaker's cooldown as
// Retry-After; a Local fallback's denial is a 429 that says it was decided
// locally.
func TestDegradedDecisionsSendNoInventedNumbers(t *testing.T) {
	down, err := tokenbucket.New(downStore{})
	require.NoError(t, err)
	local, err := tokenbucket.New(newMemStore(t))
	require.NoError(t, err)
	localPolicy, err := fallback.Local(local, fallback.Replicas(1))
	require.NoError(t, err)
	limit := sluice.PerMinute(2)
	serverWith := func(policy fallback.Policy) string {
		l, err := fallback.New(down, fallback.WithPolicy(policy), fallback.WithBreaker(fallback.Breaker{Failures: 1, Cooldown: 5 * time.Second, Probes: 1}))
		require.NoError(t, err)
		return newServer(t, []httplimit.Policy{{Name: "p", Limiter: l, Limit: limit}}).URL
	}
	noFigures := func(t *testing.T, resp *http.Response) {
		t.Helper()
		require.Equal(t, []string{`"p";q=2;w=60`}, resp.Header.Values("RateLimit-Policy"))
		require.Empty(t, resp.Header.Values("RateLimit"))
		require.Empty(t, resp.Header.Get("X-RateLimit-Remaining"))
		require.Empty(t, resp.Header.Get("X-RateLimit-Reset"))
	}

	t.Run("open", func(t *testing.T) {
		url := serverWith(fallback.Open())
		for range 3 {
			resp := get(t, url, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			noFigures(t, resp)
		}
	})
	t.Run("closed", func(t *testing.T) {
		url := serverWith(fallback.Closed())
		resp := get(t, url, nil)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "nothing was exceeded")
		require.Equal(t, "5", resp.Header.Get("Retry-After"), "the breaker's cooldown")
		noFigures(t, resp)
		body := problemBody(t, resp)
		require.Contains(t, body["detail"], "degraded")
		require.NotContains(t, body["detail"], "exceeded")
	})
	t.Run("local", func(t *testing.T) {
		url := serverWith(localPolicy)
		var codes []int
		var last *http.Response
		for range 3 {
			last = get(t, url, nil)
			codes = append(codes, last.StatusCode)
			noFigures(t, last)
		}
		require.Equal(t, []int{200, 200, 429}, codes, "the local share: the whole limit over one replica")
		require.NotEmpty(t, last.Header.Get("Retry-After"))
		body := problemBody(t, last)
		require.Contains(t, body["detail"], "degraded")
	})
}

// TestTIsTheTimeUntilMoreQuota: draft-10's t is the seconds until more
// quota is available, not until the limit is full again (draft-08): on a
// denial it equals Retry-After; after an allowed request on a bucket that
// refills one token a second, it is 1 however empty the bucket; a window
// algorithm's allowed decision gives none (it does not tell when quota
// comes back), its denial gives Retry-After.
func TestTIsTheTimeUntilMoreQuota(t *testing.T) {
	store := newMemStore(t)
	bucket := newServer(t, []httplimit.Policy{{Name: "p", Limiter: tokenBucket(t, store), Limit: sluice.PerSecond(1).WithBurst(10)}})
	for i := range 10 {
		resp := get(t, bucket.URL, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, []string{`"p";r=` + strconv.Itoa(9-i) + `;t=1`}, resp.Header.Values("RateLimit"), "request %d", i)
	}
	resp := get(t, bucket.URL, nil)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, []string{`"p";r=0;t=1`}, resp.Header.Values("RateLimit"))
	require.Equal(t, "1", resp.Header.Get("Retry-After"))

	sc, err := slidingcounter.New(newMemStore(t))
	require.NoError(t, err)
	window := newServer(t, []httplimit.Policy{{Name: "w", Limiter: sc, Limit: sluice.PerMinute(2)}})
	for i := range 2 {
		resp := get(t, window.URL, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, []string{`"w";r=` + strconv.Itoa(1-i)}, resp.Header.Values("RateLimit"))
	}
	resp = get(t, window.URL, nil)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	retry := resp.Header.Get("Retry-After")
	require.Equal(t, []string{`"w";r=0;t=` + retry}, resp.Header.Values("RateLimit"))
	require.Equal(t, []string{`"w";q=2;w=60`}, resp.Header.Values("RateLimit-Policy"))
}

// TestRNeverExceedsQ: a bucket with a burst above its rate states the
// burst as its quota, over the time it takes to refill it: 10/s with a
// burst of 50 is q=50 over w=5, so r (49 after one request) never exceeds
// q.
func TestRNeverExceedsQ(t *testing.T) {
	srv := newServer(t, []httplimit.Policy{{Name: "p", Limiter: tokenBucket(t, newMemStore(t)), Limit: sluice.PerSecond(10).WithBurst(50)}})
	resp := get(t, srv.URL, nil)
	require.Equal(t, []string{`"p";q=50;w=5`}, resp.Header.Values("RateLimit-Policy"))
	require.Equal(t, []string{`"p";r=49;t=1`}, resp.Header.Values("RateLimit"))
	require.Equal(t, "50", resp.Header.Get("X-RateLimit-Limit"))
	require.Equal(t, "49", resp.Header.Get("X-RateLimit-Remaining"))
}

// TestPolicyHeaderDoesNotChangeOnADenial: RateLimit-Policy lists every
// policy that applies to the request, whichever denies; RateLimit has an
// item for each policy checked. The 429 is the draft's quota-exceeded
// problem naming the policy that denied.
func TestPolicyHeaderDoesNotChangeOnADenial(t *testing.T) {
	tb := tokenBucket(t, newMemStore(t))
	srv := newServer(t, []httplimit.Policy{
		{Name: "tight", Limiter: tb, Limit: sluice.PerMinute(1)},
		{Name: "loose", Limiter: tb, Limit: sluice.PerMinute(100)},
	})
	want := []string{`"tight";q=1;w=60`, `"loose";q=100;w=60`}
	allowed := get(t, srv.URL, nil)
	require.Equal(t, http.StatusOK, allowed.StatusCode)
	require.Equal(t, want, allowed.Header.Values("RateLimit-Policy"))
	denied := get(t, srv.URL, nil)
	require.Equal(t, http.StatusTooManyRequests, denied.StatusCode)
	require.Equal(t, want, denied.Header.Values("RateLimit-Policy"), "the same policies on a denial")
	require.Len(t, denied.Header.Values("RateLimit"), 1, "only the policy checked")
	body := problemBody(t, denied)
	require.Equal(t, httplimit.QuotaExceededType, body["type"])
	require.Equal(t, []any{"tight"}, body["violated-policies"])
	require.Equal(t, float64(429), body["status"])
}

// TestConfigurationRefusesWhatItCannotServe: at construction, in code and
// in a file, each refusal naming the policy and the field.
func TestConfigurationRefusesWhatItCannotServe(t *testing.T) {
	store := newMemStore(t)
	tb := tokenBucket(t, store)
	sc, err := slidingcounter.New(store)
	require.NoError(t, err)
	for _, c := range []struct {
		name          string
		policies      []httplimit.Policy
		policy, field string
		wantErrIs     error
	}{
		{"cost above burst", []httplimit.Policy{{Name: "orders", Limiter: tb, Limit: sluice.PerSecond(10), Cost: 11}}, "orders", "cost", sluice.ErrCostExceedsBurst},
		{"cost above a window's rate", []httplimit.Policy{{Name: "search", Limiter: sc, Limit: sluice.PerMinute(5), Cost: 6}}, "search", "cost", sluice.ErrCostExceedsBurst},
		{"a rate the algorithm refuses", []httplimit.Policy{{Name: "fast", Limiter: tb, Limit: sluice.PerSecond(600_000)}}, "fast", "limit", nil},
		{"a burst on a window algorithm", []httplimit.Policy{{Name: "w", Limiter: sc, Limit: sluice.PerMinute(5).WithBurst(50)}}, "w", "burst", nil},
		{"duplicate names", []httplimit.Policy{{Name: "p", Limiter: tb, Limit: sluice.PerMinute(5)}, {Name: "p", Limiter: tb, Limit: sluice.PerMinute(9)}}, "p", "name", nil},
		{"a bad route", []httplimit.Policy{{Name: "r", Limiter: tb, Limit: sluice.PerMinute(5), Routes: []string{"GET"}}}, "r", "route", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := httplimit.Middleware(c.policies)
			require.Error(t, err)
			require.Contains(t, err.Error(), `"`+c.policy+`"`)
			require.Contains(t, err.Error(), c.field)
			if c.wantErrIs != nil {
				require.ErrorIs(t, err, c.wantErrIs)
			}
		})
	}
	for _, c := range []struct{ name, file, policy, field string }{
		{"cost above burst", `policies: [{name: orders, rate: 10, period: 1s, cost: 11}]`, "orders", "cost"},
		{"a burst on a window", `policies: [{name: w, algorithm: fixedwindow, rate: 5, period: 1m, burst: 50}]`, "w", "burst"},
		{"duplicate names", "policies:\n  - {name: p, rate: 5, period: 1m}\n  - {name: p, rate: 9, period: 1m}\n", "p", "name"},
		{"a fractional rate", `policies: [{name: f, rate: 2.9, period: 1s}]`, "f", "rate"},
		{"an exponent", `policies: [{name: f, rate: 1e3, period: 1s}]`, "f", "rate"},
		{"a fractional rate in JSON", `{"policies": [{"name": "f", "rate": 2.5, "period": "1s"}]}`, "f", "rate"},
		{"a header name that is no token", `policies: [{name: h, rate: 5, period: 1m, key: "header:X API Key"}]`, "h", "key"},
		{"JSON with a trailing comma", `{"policies": [{"name": "j", "rate": 5, "period": "1m"},]}`, "", "JSON"},
		{"JSON followed by more", `{"policies": [{"name": "j", "rate": 5, "period": "1m"}]} {}`, "", "JSON"},
		{"a second YAML document", "policies: [{name: y, rate: 5, period: 1m}]\n---\npolicies: [{name: z, rate: 5, period: 1m}]\n", "", "document"},
	} {
		t.Run("file/"+c.name, func(t *testing.T) {
			_, err := httplimit.Load([]byte(c.file), store)
			require.Error(t, err)
			if c.policy != "" {
				require.Contains(t, err.Error(), `"`+c.policy+`"`)
			}
			require.Contains(t, err.Error(), c.field)
		})
	}
}

// TestRoutesInCode: one middleware, policies with routes and without, as a
// file writes them: the orders policy counts POST /orders only.
func TestRoutesInCode(t *testing.T) {
	tb := tokenBucket(t, newMemStore(t))
	srv := newServer(t, []httplimit.Policy{
		{Name: "per-client", Limiter: tb, Limit: sluice.PerMinute(100)},
		{Name: "orders", Limiter: tb, Limit: sluice.PerMinute(1), Routes: []string{"POST /orders"}},
	})
	post := func() *http.Response {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/orders", strings.NewReader(""))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	require.Equal(t, http.StatusOK, post().StatusCode)
	resp := post()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, []string{`"per-client";q=100;w=60`, `"orders";q=1;w=60`}, resp.Header.Values("RateLimit-Policy"))
	other := get(t, srv.URL+"/orders", nil)
	require.Equal(t, http.StatusOK, other.StatusCode, "GET /orders is not the orders route")
	require.Equal(t, []string{`"per-client";q=100;w=60`}, other.Header.Values("RateLimit-Policy"))
}

// TestAKeyThatCannotWorkHereIs500: on a Unix-socket listener RemoteAddr is
// no address, which is the server's setup, not the client's fault: 500
// naming the misconfiguration, and logged; a request that lacks the header
// its key reads is the client's: 400.
func TestAKeyThatCannotWorkHereIs500(t *testing.T) {
	var logs strings.Builder
	mw, err := httplimit.Middleware([]httplimit.Policy{{Name: "p", Limiter: tokenBucket(t, newMemStore(t)), Limit: sluice.PerMinute(5)}},
		httplimit.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	require.NoError(t, err)
	for _, remote := range []string{"@", ""} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = remote
		rec := httptest.NewRecorder()
		mw(ok).ServeHTTP(rec, req)
		require.Equal(t, http.StatusInternalServerError, rec.Code, "RemoteAddr %q", remote)
		require.Contains(t, rec.Body.String(), "misconfigured")
	}
	require.Contains(t, logs.String(), "misconfigured")

	header, err := httplimit.Middleware([]httplimit.Policy{{Name: "p", Limiter: tokenBucket(t, newMemStore(t)), Limit: sluice.PerMinute(5), Key: httplimit.Header("X-API-Key")}})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	header(ok).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	require.Equal(t, http.StatusBadRequest, rec.Code)
	require.Contains(t, rec.Body.String(), "header X-API-Key is missing", "a NoKeyError's reason is shown")

	// The text of any other error a key function returns is never shown.
	secret := func(*http.Request) (string, error) { return "", errors.New("lookup in db://user:pass@10.0.0.1 failed") }
	custom, err := httplimit.Middleware([]httplimit.Policy{{Name: "p", Limiter: tokenBucket(t, newMemStore(t)), Limit: sluice.PerMinute(5), Key: secret}})
	require.NoError(t, err)
	rec = httptest.NewRecorder()
	custom(ok).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	require.Equal(t, http.StatusBadRequest, rec.Code)
	require.NotContains(t, rec.Body.String(), "db://")
	require.Contains(t, rec.Body.String(), `no rate-limit key for policy \"p\"`)
}
