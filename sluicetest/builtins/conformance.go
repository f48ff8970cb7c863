package builtins

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/sluicetest"
)

// RunConformance runs the conformance suite of every built-in algorithm on
// the tier newTier builds, and checks that GCRA and the token bucket, which
// read a Limit alike, decide alike.
func RunConformance(t *testing.T, newTier func(t *testing.T) sluicetest.Tier) {
	sluicetest.RunConformance(t, newTier, Algorithms...)
	t.Run("gcra and tokenbucket decide alike", func(t *testing.T) {
		t.Parallel()
		tier := newTier(t)
		clock := sluicetest.NewFakeClock(sluicetest.Epoch)
		gcra, _ := Algorithm("gcra")
		tb, _ := Algorithm("tokenbucket")
		a, err := gcra.New(tier.Store, clock)
		require.NoError(t, err)
		b, err := tb.New(tier.Store, clock)
		require.NoError(t, err)
		key := sluicetest.UniqueKey(t)
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(seed, 42))
		for i := range 300 {
			limit := bucketLimits[rng.IntN(len(bucketLimits))]
			n := rng.Int64N(limit.Burst + 1)
			clock.Advance(time.Duration(rng.Int64N(int64(400*time.Millisecond))) - 20*time.Millisecond)
			da, err := a.AllowN(t.Context(), key, limit, n)
			require.NoError(t, err)
			db, err := b.AllowN(t.Context(), key, limit, n)
			require.NoError(t, err)
			require.Equal(t, da, db, "step %d", i)
		}
	})
}
