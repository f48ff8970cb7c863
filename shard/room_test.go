package shard_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/shard"
)

// TestDeniedWhileAnotherShareHadRoom holds what docs/scaling.md says of a
// sharded key under skewed load (requests of cost 1 to 8, one every 5 ms
// of a fake clock against 600/s, burst 120, so that many are denied):
// with two shares a denial has tried both, so none is made while the
// other has room; with three, a minority of the denials are; and more
// shares make them more frequent (with six, most are).
func TestDeniedWhileAnotherShareHadRoom(t *testing.T) {
	limit := sluice.Limit{Rate: 600, Period: time.Second, Burst: 120}
	share := map[int]float64{}
	for _, s := range []int{2, 3, 6} {
		b := newBucket(t)
		l := newShard(t, b.tb, shard.WithShards(s))
		key := fmt.Sprint("tenant", s)
		var denied, deniedWithRoom int
		for i := range 20_000 {
			b.clock.Advance(5 * time.Millisecond)
			n := int64(1 + i%8)
			d, err := l.AllowN(t.Context(), key, limit, n)
			require.NoError(t, err)
			if d.Allowed {
				continue
			}
			denied++
			for j, k := range shard.SubKeys(key, s) {
				p, err := b.tb.AllowN(t.Context(), k, shard.Share(limit, s, j), 0)
				require.NoError(t, err)
				if p.Remaining >= n {
					deniedWithRoom++
					break
				}
			}
		}
		share[s] = float64(deniedWithRoom) / float64(denied)
		t.Logf("S=%d: %d denied, %d of them (%.1f%%) while another share had room", s, denied, deniedWithRoom, 100*share[s])
		if s == 2 {
			require.Zero(t, deniedWithRoom, "two shares: a denial has tried both")
			continue
		}
		require.Positive(t, deniedWithRoom, "S=%d: the documented caveat", s)
	}
	require.Less(t, share[3], 0.5, "three shares: a minority of the denials")
	require.Less(t, share[3], share[6], "more shares, more denials with room elsewhere")
}
