package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/fixedwindow"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/multilimit"
)

// TestAtomicPolicies: with AtomicMiddleware, a request the route policy denies
// consumes nothing from the tenant policy; without it, it does.
func TestAtomicPolicies(t *testing.T) {
	for _, atomic := range []bool{true, false} {
		store := newMemStore(t)
		var srv *httptest.Server
		if atomic {
			multi, err := multilimit.New(store)
			require.NoError(t, err)
			srv = newAtomicServer(t, httplimit.Atomic{Limiter: multi, Key: httplimit.Header("X-API-Key"), Policies: []httplimit.AtomicPolicy{
				{Name: "tenant", Limit: sluice.PerMinute(100)}, {Name: "route", Limit: sluice.PerMinute(2)},
			}})
		} else {
			tb := tokenBucket(t, store)
			srv = newServer(t, []httplimit.Policy{
				{Name: "tenant", Limiter: tb, Limit: sluice.PerMinute(100), Key: httplimit.Header("X-API-Key")},
				{Name: "route", Limiter: tb, Limit: sluice.PerMinute(2), Key: httplimit.Header("X-API-Key")},
			})
		}
		key := map[string]string{"X-API-Key": "k"}
		var codes []int
		var last *http.Response
		for range 5 {
			last = get(t, srv.URL, key)
			codes = append(codes, last.StatusCode)
		}
		require.Equal(t, []int{200, 200, 429, 429, 429}, codes)
		checkHeaders(t, last)
		tenantRemaining := last.Header.Values("RateLimit")[0]
		if atomic {
			require.Equal(t, `"tenant";r=98;t=1`, tenantRemaining, "denials consumed nothing from the tenant")
		} else {
			require.Equal(t, `"tenant";r=95;t=1`, tenantRemaining, "one after another, each denial still counted for the tenant")
		}
	}
}

func newAtomicServer(t *testing.T, group httplimit.Atomic, opts ...httplimit.Option) *httptest.Server {
	mw, err := httplimit.AtomicMiddleware(group, opts...)
	require.NoError(t, err)
	srv := httptest.NewServer(mw(ok))
	t.Cleanup(srv.Close)
	return srv
}

// TestAtomicMixedAlgorithms: under AtomicMiddleware each policy keeps its own
// algorithm: a token bucket per tenant and a fixed window per route, in
// one call; the window's state is fixedwindow.Limiter's own.
func TestAtomicMixedAlgorithms(t *testing.T) {
	store := newMemStore(t)
	multi, err := multilimit.New(store)
	require.NoError(t, err)
	srv := newAtomicServer(t, httplimit.Atomic{Limiter: multi, Key: httplimit.Header("X-API-Key"), Policies: []httplimit.AtomicPolicy{
		{Name: "tenant", Limit: sluice.PerMinute(100)},
		{Name: "route", Limit: sluice.PerMinute(2), Algorithm: multilimit.FixedWindow},
	}})
	var codes []int
	var last *http.Response
	for range 4 {
		last = get(t, srv.URL, map[string]string{"X-API-Key": "k"})
		codes = append(codes, last.StatusCode)
	}
	require.Equal(t, []int{200, 200, 429, 429}, codes)
	require.Equal(t, `"tenant";r=98;t=1`, last.Header.Values("RateLimit")[0], "denials consumed nothing from the tenant")

	fw, err := fixedwindow.New(store)
	require.NoError(t, err)
	d, err := fw.AllowN(t.Context(), sluice.Key("k", "http", "route"), sluice.PerMinute(2), 0)
	require.NoError(t, err)
	require.False(t, d.Allowed, "the route's window is the fixed window's own state, used up")

	_, err = httplimit.AtomicMiddleware(httplimit.Atomic{Limiter: multi, Policies: []httplimit.AtomicPolicy{{Name: "a", Limit: sluice.PerMinute(10), Algorithm: "leaky"}}})
	require.ErrorContains(t, err, `unknown algorithm "leaky"`)
	_, err = httplimit.AtomicMiddleware(httplimit.Atomic{Limiter: multi, Cost: 5, Policies: []httplimit.AtomicPolicy{
		{Name: "a", Limit: sluice.PerSecond(3).WithBurst(10), Algorithm: multilimit.SlidingLog},
	}})
	require.ErrorIs(t, err, sluice.ErrCostExceedsBurst, "a window allows at most its rate")
}
