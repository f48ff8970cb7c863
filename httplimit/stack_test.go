package httplimit_test

import (
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/shard"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memstore"
)

var rateLimitItem = regexp.MustCompile(`^"p";r=([0-9]+);t=([0-9]+)$`) // t: the bucket is not full

// TestHeadersAreHonestUnderLeaseAndShard: behind a lease or a shard, the
// RateLimit header reports what the shared limit has left (an estimate,
// near the truth), not what the local lease or one share has.
func TestHeadersAreHonestUnderLeaseAndShard(t *testing.T) {
	limit := sluice.PerMinute(1000).WithBurst(1000)
	for _, c := range []struct {
		name string
		wrap func(sluice.Limiter) (sluice.Limiter, error)
		// how far the estimate may be off: a shard scales one share's
		// remaining by 4, and the 10 requests may all have gone to it
		off float64
	}{
		{"lease", func(l sluice.Limiter) (sluice.Limiter, error) { return lease.New(l, lease.WithSize(50)) }, 8},
		{"shard", func(l sluice.Limiter) (sluice.Limiter, error) { return shard.New(l, shard.WithShards(4)) }, 30},
	} {
		t.Run(c.name, func(t *testing.T) {
			tb, err := tokenbucket.New(newMemStore(t))
			require.NoError(t, err)
			l, err := c.wrap(tb)
			require.NoError(t, err)
			if closer, ok := l.(interface{ Close() error }); ok {
				t.Cleanup(func() { _ = closer.Close() })
			}
			srv := newServer(t, []httplimit.Policy{{Name: "p", Limiter: l, Limit: limit}})
			var resp *http.Response
			for range 10 {
				resp = get(t, srv.URL, nil)
				require.Equal(t, http.StatusOK, resp.StatusCode)
			}
			m := rateLimitItem.FindStringSubmatch(resp.Header.Get("RateLimit"))
			require.NotNil(t, m, resp.Header.Get("RateLimit"))
			r, _ := strconv.Atoi(m[1])
			reset, _ := strconv.Atoi(m[2])
			require.InDelta(t, 990, r, c.off, "what the shared limit has left after 10 requests")
			require.Positive(t, reset, "the bucket is not full")
		})
	}
}

// TestTUnderALeaseIsTrue: behind a lease, the RateLimit t of every
// decision is never above the real wait for the next token to come back
// to the shared bucket (read from the bucket itself), and is 0 only when
// one is left now. The lease's Remaining is an estimate; t does not lean
// on it.
func TestTUnderALeaseIsTrue(t *testing.T) {
	clock := sluicetest.NewFakeClock(sluicetest.Epoch)
	tb, err := tokenbucket.New(newMemStore(t, memstore.WithClock(clock)), tokenbucket.WithClock(clock))
	require.NoError(t, err)
	l, err := lease.New(tb, lease.WithSize(5), lease.WithClock(clock), lease.WithHold(time.Hour))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	limit := sluice.Limit{Rate: 1, Period: time.Second, Burst: 10} // a token a second
	item := regexp.MustCompile(`^"p";r=([0-9]+)(?:;t=([0-9]+))?$`)
	checked := 0
	for step := range 60 {
		d, err := l.AllowN(t.Context(), "k", limit, 1)
		require.NoError(t, err)
		_, rateLimit := httplimit.Fields("p", l, limit, d)
		m := item.FindStringSubmatch(rateLimit)
		require.NotNil(t, m, rateLimit)
		// The shared bucket as it is: a peek of another holder.
		peek, err := tb.Lease(t.Context(), ext.LeaseRequest{Key: "k", Limit: limit, Holder: 99, Hold: time.Second})
		require.NoError(t, err)
		if m[2] != "" {
			tSeconds, _ := strconv.ParseInt(m[2], 10, 64)
			next := peek.ResetAfter % time.Second // the next token, a second apart
			if next == 0 && peek.ResetAfter > 0 {
				next = time.Second
			}
			require.LessOrEqual(t, tSeconds, int64((next+time.Second-1)/time.Second),
				"step %d: %s, but the next token comes back in %s (%+v)", step, rateLimit, next, d)
			if tSeconds == 0 {
				require.True(t, d.Allowed && peek.Remaining > 0, "step %d: t=0 but nothing is left now (%+v)", step, d)
			}
			checked++
		}
		clock.Advance(time.Duration(300+step*37%500) * time.Millisecond)
	}
	require.Greater(t, checked, 30)
}
