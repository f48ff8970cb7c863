package httplimit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/store/embedded"
	"github.com/sluicehq/sluice/store/memstore"
)

// newMemStore returns memstore.New(opts...), failing t on an error.
func newMemStore(t testing.TB, opts ...memstore.Option) *memstore.Store {
	t.Helper()
	s, err := memstore.New(opts...)
	require.NoError(t, err)
	return s
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })

func newServer(t *testing.T, policies []httplimit.Policy, opts ...httplimit.Option) *httptest.Server {
	mw, err := httplimit.Middleware(policies, opts...)
	require.NoError(t, err)
	srv := httptest.NewServer(mw(ok))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string, header map[string]string) *http.Response {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// The grammar of draft-ietf-httpapi-ratelimit-headers-10 over RFC 9651
// structured fields: a list of items, each a string (the policy name) with
// parameters; RateLimit-Policy needs q (an integer), RateLimit needs r.
var (
	sfKey      = `[a-z*][a-z0-9_\-.*]*`
	sfValue    = `(?:-?[0-9]{1,15}|"[\x20-\x21\x23-\x5b\x5d-\x7e]*"|[A-Za-z*][!#$%&'*+\-.^_` + "`" + `|~:/A-Za-z0-9]*|\?[01])`
	sfParam    = `;` + sfKey + `(?:=` + sfValue + `)?`
	sfItem     = `"[\x20-\x21\x23-\x5b\x5d-\x7e]*"(?:` + sfParam + `)*`
	sfList     = regexp.MustCompile(`^` + sfItem + `(?:[ \t]*,[ \t]*` + sfItem + `)*$`)
	policyItem = regexp.MustCompile(`^"[^"]+";q=[0-9]+;w=[0-9]+$`)
	limitItem  = regexp.MustCompile(`^"[^"]+";r=[0-9]+(;t=[0-9]+)?$`)
)

func checkHeaders(t *testing.T, resp *http.Response) {
	t.Helper()
	for _, field := range []string{"RateLimit-Policy", "RateLimit"} {
		v := strings.Join(resp.Header.Values(field), ", ")
		require.NotEmpty(t, v, field)
		require.Regexp(t, sfList, v, "%s is a structured-field list", field)
		for _, item := range strings.Split(v, ", ") {
			if field == "RateLimit" {
				require.Regexp(t, limitItem, item)
			} else {
				require.Regexp(t, policyItem, item)
			}
		}
	}
}

func tokenBucket(t *testing.T, store sluice.Store) sluice.Limiter {
	l, err := tokenbucket.New(store)
	require.NoError(t, err)
	return l
}

func TestDenialIs429WithHonestRetryAfter(t *testing.T) {
	store, err := embedded.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	limit := sluice.Limit{Rate: 1, Period: 1500 * time.Millisecond, Burst: 2}
	srv := newServer(t, []httplimit.Policy{{Name: "per-ip", Limiter: tokenBucket(t, store), Limit: limit}})

	for i := range 2 {
		resp := get(t, srv.URL, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, "request %d", i)
		checkHeaders(t, resp)
		require.Equal(t, strconv.Itoa(1-i), resp.Header.Get("X-RateLimit-Remaining"))
		require.Equal(t, "2", resp.Header.Get("X-RateLimit-Limit"), "the burst: what may be spent at once")
	}
	resp := get(t, srv.URL, nil)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	checkHeaders(t, resp)
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	require.Equal(t, float64(429), body["status"])
	require.Equal(t, httplimit.QuotaExceededType, body["type"])
	require.Equal(t, []any{"per-ip"}, body["violated-policies"])
	retry, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err)
	require.Equal(t, 2, retry, "1.5 s rounded up to whole seconds")

	// A client that honours Retry-After exactly gets through.
	time.Sleep(time.Duration(retry) * time.Second)
	resp = get(t, srv.URL, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestSeveralPoliciesAndHeaderSwitches(t *testing.T) {
	store := newMemStore(t)
	tb := tokenBucket(t, store)
	policies := []httplimit.Policy{
		{Name: "tenant", Limiter: tb, Limit: sluice.PerMinute(100), Key: httplimit.Header("X-API-Key")},
		{Name: "route", Limiter: tb, Limit: sluice.PerMinute(3), Key: httplimit.Header("X-API-Key"), Cost: 1},
	}
	srv := newServer(t, policies)
	key := map[string]string{"X-API-Key": "secret-key-123"}
	resp := get(t, srv.URL, key)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	checkHeaders(t, resp)
	require.Equal(t, []string{`"tenant";q=100;w=60`, `"route";q=3;w=60`}, resp.Header.Values("RateLimit-Policy"))
	require.Equal(t, "2", resp.Header.Get("X-RateLimit-Remaining"), "the tightest policy")
	for name, values := range resp.Header {
		for _, v := range values {
			require.NotContains(t, v, "secret-key-123", "header %s carries no key", name)
		}
	}
	resp = get(t, srv.URL, nil)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "no API key: no limit can apply")

	bare := newServer(t, policies[:1], httplimit.WithoutIETFHeaders(), httplimit.WithoutXHeaders())
	resp = get(t, bare.URL, key)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, resp.Header.Get("RateLimit"))
	require.Empty(t, resp.Header.Get("X-RateLimit-Remaining"))
}

// failing is a limiter whose store is down, with no fallback composed.
type failing struct{}

func (failing) AllowN(_ context.Context, _ string, _ sluice.Limit, _ int64) (sluice.Decision, error) {
	return sluice.Decision{}, errors.New("dial tcp: connection refused")
}

func TestLimiterErrors(t *testing.T) {
	var logs bytes.Buffer
	srv := newServer(t, []httplimit.Policy{{Name: "p", Limiter: failing{}, Limit: sluice.PerSecond(1)}},
		httplimit.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	resp := get(t, srv.URL, nil)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Contains(t, logs.String(), "connection refused", "the error is logged")

	custom := newServer(t, []httplimit.Policy{{Name: "p", Limiter: failing{}, Limit: sluice.PerSecond(1)}},
		httplimit.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusTeapot) }))
	resp = get(t, custom.URL, nil)
	require.Equal(t, http.StatusTeapot, resp.StatusCode)
}

func TestBadPolicies(t *testing.T) {
	tb := tokenBucket(t, newMemStore(t))
	for _, ps := range [][]httplimit.Policy{
		nil,
		{{Name: "", Limiter: tb, Limit: sluice.PerSecond(1)}},
		{{Name: "a b", Limiter: tb, Limit: sluice.PerSecond(1)}},
		{{Name: "p", Limit: sluice.PerSecond(1)}},
		{{Name: "p", Limiter: tb, Limit: sluice.Limit{}}},
		{{Name: "p", Limiter: tb, Limit: sluice.PerSecond(1), Cost: -1}},
	} {
		_, err := httplimit.Middleware(ps)
		require.Error(t, err)
	}
}

func TestBadOptions(t *testing.T) {
	ps := []httplimit.Policy{{Name: "p", Limiter: tokenBucket(t, newMemStore(t)), Limit: sluice.PerSecond(1)}}
	for _, c := range []struct {
		opt  httplimit.Option
		want string
	}{
		{nil, "httplimit: option 1 is nil"},
		{httplimit.WithErrorHandler(nil), "httplimit: WithErrorHandler(nil)"},
		{httplimit.WithLogger(nil), "httplimit: WithLogger(nil)"},
	} {
		_, err := httplimit.Middleware(ps, httplimit.WithoutXHeaders(), c.opt)
		require.ErrorContains(t, err, c.want)
	}
	_, err := httplimit.AtomicMiddleware(httplimit.Atomic{}, nil)
	require.ErrorContains(t, err, "httplimit: atomic group: limiter")
}
