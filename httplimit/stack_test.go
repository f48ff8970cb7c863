package httplimit_test

import (
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/shard"
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
