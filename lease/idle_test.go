package lease_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/lease"
)

// TestAnIdleLimiterSleeps: with 1,000 keys leased and then no request for
// 10 s, the janitor wakes once to release the leases at their deadline
// and once to forget them a hold later, then not at all: nothing ticks
// while nothing happens. Its wake-ups are counted in fake time
// (testing/synctest), so the machine's load cannot change them.
func TestAnIdleLimiterSleeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb, err := tokenbucket.New(newMemStore(t))
		require.NoError(t, err)
		l, err := lease.New(tb)
		require.NoError(t, err)
		defer func() { require.NoError(t, l.Close()) }()
		limit := sluice.PerSecond(1000)
		for i := range 1000 {
			d, err := l.AllowN(t.Context(), sluice.Key(fmt.Sprint("tenant", i)), limit, 1)
			require.NoError(t, err)
			require.True(t, d.Allowed)
		}
		synctest.Wait()
		require.Zero(t, l.Stats().Sweeps, "no sweep while the leases last")

		time.Sleep(10 * time.Second)
		synctest.Wait()
		s := l.Stats()
		require.LessOrEqual(t, s.Sweeps, int64(3), "released at the deadline, forgotten a hold later")
		require.GreaterOrEqual(t, s.Releases, int64(1000), "every lease was given back")
		for i := range 1000 {
			require.Zero(t, l.Held(sluice.Key(fmt.Sprint("tenant", i))))
		}

		time.Sleep(time.Minute)
		synctest.Wait()
		require.Equal(t, s.Sweeps, l.Stats().Sweeps, "nothing leased: no wake-up at all")
	})
}

// BenchmarkIdleLimiter measures the CPU an idle Limiter costs: 1,000 keys
// leased, then 10 s without a request, as the share of one core the
// process used meanwhile (user and system time, from getrusage). Run it
// alone, once:
//
//	go test -run '^$' -bench BenchmarkIdleLimiter -benchtime 1x ./lease/
func BenchmarkIdleLimiter(b *testing.B) {
	for b.Loop() {
		tb, err := tokenbucket.New(newMemStore(b))
		require.NoError(b, err)
		l, err := lease.New(tb)
		require.NoError(b, err)
		for i := range 1000 {
			_, err := l.AllowN(b.Context(), sluice.Key(fmt.Sprint("tenant", i)), sluice.PerSecond(1000), 1)
			require.NoError(b, err)
		}
		before, start := cpuTime(b), time.Now()
		time.Sleep(10 * time.Second)
		used, elapsed := cpuTime(b)-before, time.Since(start)
		b.ReportMetric(100*used.Seconds()/elapsed.Seconds(), "%core")
		require.NoError(b, l.Close())
	}
}
