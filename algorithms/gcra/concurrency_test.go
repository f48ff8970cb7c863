package gcra_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/builtins"
	"github.com/sluicehq/sluice/sluicetest/redistest"
)

// TestConcurrentProcesses: 4 processes × 16 goroutines on one key of a real
// redis-server for 2 s. GCRA admits at most Burst + Rate × T over the run
// (T from the first call's start to the last call's end), and at least 95%
// of Burst + Rate × S under a load well above the limit, S the part of T
// over which the calls show the limiter saturated ([builtins.Saturated]):
// after a denial the theoretical arrival time is more than Burst - 1
// emission intervals ahead, so the limiter forgoes capacity only once that
// long has passed without a denial. On a loaded machine S leaves out the
// time the callers or the server got no CPU.
func TestConcurrentProcesses(t *testing.T) {
	server := redistest.SharedRedis(t)
	limit := sluice.Limit{Rate: 400, Period: time.Second, Burst: 50}
	calls := builtins.RunLoad(t, builtins.Load{
		Algorithm: "gcra", Backend: "rueidis", Addr: server.Addr(),
		Key: sluice.Key(sluicetest.UniqueKey(t)), Limit: limit,
		Processes: 4, Goroutines: 16, Duration: 2 * time.Second,
	})
	allowed := len(builtins.Allowed(calls))
	span := builtins.Span(calls)
	bound := float64(limit.Burst) + float64(limit.Rate)*span.Seconds()
	saturated := builtins.Saturated(calls, time.Duration(limit.Burst-1)*limit.Period/time.Duration(limit.Rate))
	owed := float64(limit.Burst) + float64(limit.Rate)*saturated.Seconds()
	t.Logf("%d calls over %s, saturated %s; %d allowed, bound %.1f (%.2f%%), owed %.1f (%.2f%%)", len(calls), span.Round(time.Millisecond),
		saturated.Round(time.Millisecond), allowed, bound, 100*float64(allowed)/bound, owed, 100*float64(allowed)/owed)
	require.LessOrEqual(t, float64(allowed), bound, "over-admission")
	require.GreaterOrEqual(t, float64(allowed), 0.95*owed, "under-admission")
	require.Greater(t, len(calls), 2*allowed, "the load must exceed the limit")
}
