package tokenbucket_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/builtins"
	"github.com/sluicehq/sluice/sluicetest/redistest"
)

// TestConcurrentProcesses: 4 OS processes × 16 goroutines hammer one key on
// a real redis-server for 3 s, through each backend. The bucket must admit
// at most Burst + Rate × T, T measured from the first call's start to the
// last call's end over all processes, and at least 95% of
// Burst + Rate × S, S the part of T over which the calls show the bucket
// saturated ([builtins.Saturated]): a bucket that has just denied holds
// less than one token, so it is full, and loses its refill, only once
// (Burst - 1) / Rate has passed without a denial. On an idle machine S is
// T but for a few milliseconds; on a loaded one it leaves out the time the
// callers or the server got no CPU, when the refill goes unclaimed for
// want of calls, not for a fault of the bucket.
func TestConcurrentProcesses(t *testing.T) {
	server := redistest.SharedRedis(t)
	limit := sluice.Limit{Rate: 500, Period: time.Second, Burst: 100}
	for _, backend := range []string{"go-redis", "rueidis"} {
		t.Run(backend, func(t *testing.T) {
			calls := builtins.RunLoad(t, builtins.Load{
				Algorithm: "tokenbucket", Backend: backend, Addr: server.Addr(),
				Key: sluice.Key(sluicetest.UniqueKey(t)), Limit: limit,
				Processes: 4, Goroutines: 16, Duration: 3 * time.Second,
			})
			allowed := len(builtins.Allowed(calls))
			span := builtins.Span(calls)
			perSecond := float64(limit.Rate) / limit.Period.Seconds()
			bound := float64(limit.Burst) + perSecond*span.Seconds()
			saturated := builtins.Saturated(calls, time.Duration(limit.Burst-1)*limit.Period/time.Duration(limit.Rate))
			owed := float64(limit.Burst) + perSecond*saturated.Seconds()
			t.Logf("%s: %d calls over %s, saturated %s; %d allowed, bound %.1f (%.2f%%), owed %.1f (%.2f%%)", backend, len(calls),
				span.Round(time.Millisecond), saturated.Round(time.Millisecond), allowed, bound, 100*float64(allowed)/bound, owed, 100*float64(allowed)/owed)
			require.GreaterOrEqual(t, span, 3*time.Second)
			require.LessOrEqual(t, float64(allowed), bound, "over-admission")
			require.GreaterOrEqual(t, float64(allowed), 0.95*owed, "under-admission")
			require.Greater(t, len(calls), 2*allowed, "the load must exceed the limit for the test to mean anything")
		})
	}
}
