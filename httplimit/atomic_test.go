package httplimit_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/fixedwindow"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/multilimit"
	"github.com/sluicehq/sluice/store/memstore"
)

// TestAtomicPolicies: with WithAtomic, a request the route policy denies
// consumes nothing from the tenant policy; without it, it does.
func TestAtomicPolicies(t *testing.T) {
	for _, atomic := range []bool{true, false} {
		store := memstore.New()
		policies := []httplimit.Policy{
			{Name: "tenant", Limit: sluice.PerMinute(100), Key: httplimit.Header("X-API-Key")},
			{Name: "route", Limit: sluice.PerMinute(2), Key: httplimit.Header("X-API-Key")},
		}
		var opts []httplimit.Option
		if atomic {
			multi, err := multilimit.New(store)
			require.NoError(t, err)
			opts = append(opts, httplimit.WithAtomic(multi))
		} else {
			tb := tokenBucket(t, store)
			for i := range policies {
				policies[i].Limiter = tb
			}
		}
		srv := newServer(t, policies, opts...)
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
			require.Equal(t, `"tenant";r=98;t=2`, tenantRemaining, "denials consumed nothing from the tenant")
		} else {
			require.Equal(t, `"tenant";r=95;t=3`, tenantRemaining, "one after another, each denial still counted for the tenant")
		}
	}
	_, err := httplimit.Middleware([]httplimit.Policy{
		{Name: "a", Limit: sluice.PerMinute(10), Cost: 1}, {Name: "b", Limit: sluice.PerMinute(10), Cost: 2},
	}, httplimit.WithAtomic(mustMulti(t)))
	require.ErrorContains(t, err, "share one cost")
}

func mustMulti(t *testing.T) *multilimit.Limiter {
	m, err := multilimit.New(memstore.New())
	require.NoError(t, err)
	return m
}

// TestAtomicMixedAlgorithms: under WithAtomic each policy keeps its own
// algorithm: a token bucket per tenant and a fixed window per route, in
// one call; the window's state is fixedwindow.Limiter's own.
func TestAtomicMixedAlgorithms(t *testing.T) {
	store := memstore.New()
	multi, err := multilimit.New(store)
	require.NoError(t, err)
	policies := []httplimit.Policy{
		{Name: "tenant", Limit: sluice.PerMinute(100), Key: httplimit.Header("X-API-Key")},
		{Name: "route", Limit: sluice.PerMinute(2), Key: httplimit.Header("X-API-Key"), Algorithm: multilimit.FixedWindow},
	}
	srv := newServer(t, policies, httplimit.WithAtomic(multi))
	var codes []int
	var last *http.Response
	for range 4 {
		last = get(t, srv.URL, map[string]string{"X-API-Key": "k"})
		codes = append(codes, last.StatusCode)
	}
	require.Equal(t, []int{200, 200, 429, 429}, codes)
	require.Equal(t, `"tenant";r=98;t=2`, last.Header.Values("RateLimit")[0], "denials consumed nothing from the tenant")

	fw, err := fixedwindow.New(store)
	require.NoError(t, err)
	d, err := fw.AllowN(t.Context(), sluice.Key("k", "http", "route"), sluice.PerMinute(2), 0)
	require.NoError(t, err)
	require.False(t, d.Allowed, "the route's window is the fixed window's own state, used up")

	_, err = httplimit.Middleware([]httplimit.Policy{{Name: "a", Limit: sluice.PerMinute(10), Algorithm: "leaky"}}, httplimit.WithAtomic(multi))
	require.ErrorContains(t, err, `unknown algorithm "leaky"`)
	_, err = httplimit.Middleware([]httplimit.Policy{
		{Name: "a", Limit: sluice.PerSecond(3).WithBurst(10), Cost: 5, Algorithm: multilimit.SlidingLog},
	}, httplimit.WithAtomic(multi))
	require.ErrorIs(t, err, sluice.ErrCostExceedsBurst, "a window allows at most its rate")
}
