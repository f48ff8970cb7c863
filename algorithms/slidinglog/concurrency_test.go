package slidinglog_test

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
// redis-server for 2 s. On the recorded trace, no interval of length Period
// holds more than Rate calls that were surely decided inside it, and the
// log keeps admitting Rate per Period under load: at least 90% of
// Rate × S / Period, S the part of the run over which the calls show the
// log saturated ([builtins.Saturated], with a denial less than Period / 10
// before). A denial means the log holds Rate entries of the last Period,
// so an entry that expires during S is replaced within Period / 10 or
// not at all: over S the log admits at least Rate × S / (1.1 × Period),
// 91% of it. On a loaded machine S leaves out the time the callers or the
// server got no CPU, when entries expire unreplaced for want of calls.
func TestConcurrentProcesses(t *testing.T) {
	server := redistest.SharedRedis(t)
	limit := sluice.Limit{Rate: 100, Period: 250 * time.Millisecond, Burst: 1}
	calls := builtins.RunLoad(t, builtins.Load{
		Algorithm: "slidinglog", Backend: "rueidis", Addr: server.Addr(),
		Key: sluice.Key(sluicetest.UniqueKey(t)), Limit: limit,
		Processes: 4, Goroutines: 16, Duration: 2 * time.Second,
	})
	allowed := builtins.Allowed(calls)
	worst := builtins.MaxSurelyWithin(allowed, limit.Period)
	span := builtins.Span(calls)
	ideal := float64(limit.Rate) * span.Seconds() / limit.Period.Seconds()
	saturated := builtins.Saturated(calls, limit.Period/10)
	owed := float64(limit.Rate) * saturated.Seconds() / limit.Period.Seconds()
	t.Logf("%d calls over %s, saturated %s; %d allowed (%.1f%% of Rate × T, %.1f%% of Rate × S); at most %d within any %s",
		len(calls), span.Round(time.Millisecond), saturated.Round(time.Millisecond), len(allowed),
		100*float64(len(allowed))/ideal, 100*float64(len(allowed))/owed, worst, limit.Period)
	require.LessOrEqual(t, worst, int(limit.Rate), "more than Rate within one Period")
	require.LessOrEqual(t, float64(len(allowed)), ideal+float64(limit.Rate))
	require.GreaterOrEqual(t, float64(len(allowed)), 0.9*owed)
}
