package fallback_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/slidinglog"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/fallback"
)

// downStore is a store whose every call fails, as an unreachable Redis.
type downStore struct{}

func (downStore) Run(context.Context, *sluice.Script, []string, []int64) ([]int64, error) {
	return nil, errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
}

// TestBadInputIsAnErrorWhateverTheBreaker: with the store down and the
// breaker open, every policy still refuses what the wrapped algorithm
// refuses, by its own rules (issue 15, item 2).
func TestBadInputIsAnErrorWhateverTheBreaker(t *testing.T) {
	tb, err := tokenbucket.New(downStore{})
	require.NoError(t, err)
	sl, err := slidinglog.New(downStore{})
	require.NoError(t, err)
	localTB, err := tokenbucket.New(newMemStore(t))
	require.NoError(t, err)
	local, err := fallback.Local(localTB, func() int { return 3 })
	require.NoError(t, err)
	limit := sluice.PerSecond(10).WithBurst(20)
	for _, p := range []struct {
		name   string
		policy fallback.Policy
	}{{"open", fallback.Open()}, {"closed", fallback.Closed()}, {"local", local}} {
		for _, alg := range []struct {
			name string
			next sluice.Limiter
			bad  sluice.Limit // a limit the algorithm refuses
		}{{"tokenbucket", tb, sluice.PerSecond(600_000)}, {"slidinglog", sl, sluice.PerSecond(20_000)}} {
			t.Run(p.name+"/"+alg.name, func(t *testing.T) {
				l, err := fallback.New(alg.next, fallback.WithPolicy(p.policy), fallback.WithBreaker(fallback.Breaker{Failures: 1, Cooldown: time.Minute, Probes: 1}))
				require.NoError(t, err)
				_, err = l.AllowN(t.Context(), "k", limit, 1)
				require.NoError(t, err, "the policy decides a good request")
				require.Equal(t, fallback.BreakerOpen, l.Stats().Breaker)
				for _, c := range []struct {
					name  string
					limit sluice.Limit
					n     int64
					want  error
				}{
					{"cost -1", limit, -1, sluice.ErrInvalidCost},
					{"cost MinInt64", limit, math.MinInt64, sluice.ErrInvalidCost},
					{"cost above capacity", limit, 21, sluice.ErrCostExceedsBurst},
					{"cost MaxInt64", limit, math.MaxInt64, sluice.ErrCostExceedsBurst},
					{"a limit the algorithm refuses", alg.bad, 1, sluice.ErrInvalidLimit},
				} {
					_, err := l.AllowN(t.Context(), "k", c.limit, c.n)
					require.ErrorIs(t, err, c.want, c.name)
				}
			})
		}
	}
}

// TestLocalSharesAreValidAndKeepTheBound (issue 15, items 3 and 4): the
// Local policy's share of a limit is always one the algorithm accepts
// (100,000/s over 3 is 33,333/s, whose interval the token bucket refuses),
// and never above limit / N, also when Rate is below N (2/s over 4: each
// process 1 per 2 s, not 1 per second). With Burst below N each process
// still has a burst of 1: the burst part of the bound is then N.
func TestLocalSharesAreValidAndKeepTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		down, err := tokenbucket.New(downStore{})
		require.NoError(t, err)
		newProcess := func(n int) *fallback.Limiter {
			local, err := tokenbucket.New(newMemStore(t))
			require.NoError(t, err)
			policy, err := fallback.Local(local, fallback.Replicas(n))
			require.NoError(t, err)
			l, err := fallback.New(down, fallback.WithPolicy(policy), fallback.WithBreaker(fallback.Breaker{Failures: 1, Cooldown: time.Minute, Probes: 1}))
			require.NoError(t, err)
			return l
		}
		// admit sends a request every step of fake time for d.
		admit := func(l *fallback.Limiter, limit sluice.Limit, d, step time.Duration) (admitted int64) {
			for start := time.Now(); time.Since(start) < d; time.Sleep(step) {
				dec, err := l.AllowN(t.Context(), "k", limit, 1)
				require.NoError(t, err, "the policy decides")
				require.Equal(t, sluice.SourceFallbackLocal, dec.Source)
				if dec.Allowed {
					admitted++
				}
			}
			return admitted
		}

		high := sluice.PerSecond(100_000).WithBurst(3000)
		elapsed := 300 * time.Millisecond
		admitted := admit(newProcess(3), high, elapsed, 10*time.Microsecond)
		bound := float64(high.Burst)/3 + float64(high.Rate)/3*elapsed.Seconds()
		t.Logf("100,000/s over 3: one process admitted %d in %s (its bound %.0f)", admitted, elapsed, bound)
		require.LessOrEqual(t, float64(admitted), bound)
		// 33,333/s is refused for its interval (30.0003 µs) and enforced as 1 per
		// 31 µs: 1,000 + 300 ms / 31 µs.
		require.Equal(t, int64(1000+300_000/31), admitted, "the share is enforced, not refused")

		low := sluice.PerSecond(2).WithBurst(2) // the case: 8 admitted against a bound of 4.4
		var total int64
		elapsed = 1200 * time.Millisecond
		for range 4 {
			total += admit(newProcess(4), low, elapsed, time.Millisecond)
		}
		bound = float64(low.Burst) + float64(low.Rate)*elapsed.Seconds()
		t.Logf("2/s burst 2 over 4: the processes admitted %d in %s each (bound %.1f)", total, elapsed, bound)
		require.LessOrEqual(t, float64(total), bound)
		require.Equal(t, int64(4), total, "each process its burst of 1; none refills within 2 s")
	})
}
