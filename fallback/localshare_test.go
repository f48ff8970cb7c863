package fallback_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/fallback"
)

// TestLocalShareAtTheExtremes: for every algorithm and every limit it
// accepts at the ends of its bounds, over 1 to a million replicas, the
// Local policy decides (the share is a limit the algorithm accepts, never
// an error), and the share never allows more than limit / N: its rate is
// at most Rate / N per Period (or, where no Limit can say that, 1 per
// MaxPeriod) and its burst at most max(Burst / N, 1).
func TestLocalShareAtTheExtremes(t *testing.T) {
	limits := []sluice.Limit{
		{Rate: 1, Period: sluice.MaxPeriod, Burst: 10}, // the issue's: 1 per 366 days, burst 10
		{Rate: 1, Period: sluice.MaxPeriod, Burst: 1},
		{Rate: 3, Period: sluice.MaxPeriod, Burst: 9},
		{Rate: 1_000_000, Period: time.Second, Burst: sluice.MaxBurst},
		{Rate: 1000, Period: sluice.MinPeriod, Burst: 1},
		{Rate: 1000, Period: sluice.MinPeriod, Burst: 1000},
		{Rate: 100_000, Period: time.Second, Burst: 3000},
		{Rate: 10_000, Period: time.Second, Burst: 10_000},
		{Rate: 7, Period: 13 * time.Millisecond, Burst: 3},
		{Rate: 999_999, Period: time.Second, Burst: 1},
	}
	replicas := []int{0, 1, 2, 3, 4, 7, 1000, 1 << 20}
	for _, name := range algorithms.Names {
		t.Run(name, func(t *testing.T) {
			primary, err := algorithms.New(name, downStore{})
			require.NoError(t, err)
			local, err := algorithms.New(name, newMemStore(t))
			require.NoError(t, err)
			tried := 0
			for _, limit := range limits {
				if _, err := ext.Capacity(local, "k", limit); err != nil {
					continue // a limit this algorithm refuses anyway
				}
				tried++
				for _, n := range replicas {
					policy, err := fallback.Local(local, fallback.Replicas(n))
					require.NoError(t, err)
					l, err := fallback.New(primary, fallback.WithPolicy(policy), fallback.WithBreaker(fallback.Breaker{Failures: 1, Cooldown: time.Hour, Probes: 1}))
					require.NoError(t, err)
					d, err := l.AllowN(t.Context(), "k", limit, 0)
					require.NoError(t, err, "%s over %d", limit, n)
					require.Equal(t, sluice.SourceFallbackLocal, d.Source)
					share := d.Limit
					_, err = ext.Capacity(local, "k", share)
					require.NoError(t, err, "the share %s of %s over %d", share, limit, n)
					requireWithinShare(t, limit, share, max(n, 1))
				}
			}
			require.GreaterOrEqual(t, tried, 5, "most extremes apply to every algorithm")
		})
	}
}

// requireWithinShare requires share to allow no more than limit / n: a
// rate (tokens per microsecond) at most limit's over n, unless limit's is
// below 1 per MaxPeriod over n, where share must be 1 per MaxPeriod; and a
// burst at most max(limit.Burst / n, 1).
func requireWithinShare(t *testing.T, limit, share sluice.Limit, n int) {
	t.Helper()
	rate := func(l sluice.Limit) *big.Rat { return big.NewRat(l.Rate, l.PeriodMicros()) }
	want := new(big.Rat).Quo(rate(limit), big.NewRat(int64(n), 1))
	slowest := big.NewRat(1, sluice.MaxPeriod.Microseconds())
	if want.Cmp(slowest) < 0 {
		require.Equal(t, 0, rate(share).Cmp(slowest), "%s over %d: 1 per MaxPeriod, got %s", limit, n, share)
	} else {
		require.LessOrEqual(t, rate(share).Cmp(want), 0, "%s over %d: the share %s refills faster", limit, n, share)
	}
	require.LessOrEqual(t, share.Burst, max(limit.Burst/int64(n), 1), "%s over %d: the share %s", limit, n, share)
	require.GreaterOrEqual(t, share.Burst, int64(1))
}
