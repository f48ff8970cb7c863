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
// of it under a load well above the limit.
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
	t.Logf("%d calls over %s, %d allowed, bound %.1f (%.2f%%)", len(calls), span, allowed, bound, 100*float64(allowed)/bound)
	require.LessOrEqual(t, float64(allowed), bound, "over-admission")
	require.GreaterOrEqual(t, float64(allowed), 0.95*bound, "under-admission")
	require.Greater(t, len(calls), 2*allowed, "the load must exceed the limit")
}
