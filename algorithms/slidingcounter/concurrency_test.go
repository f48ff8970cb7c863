package slidingcounter_test

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
// holds more than 2 × Rate calls surely decided inside it; over the run the
// counter admits about Rate per Period: at least 90% of Rate × S / Period,
// S the part of the run over which the calls show the counter saturated
// ([builtins.Saturated], with a denial less than Period / 10 before). On a
// loaded machine S leaves out the time the callers or the server got no
// CPU, when the counter's allowance goes unclaimed for want of calls.
// (That every decision equals the weighted-estimate formula is what the
// conformance suite and the differential fuzz test check, against the Go
// model of the formula.)
func TestConcurrentProcesses(t *testing.T) {
	server := redistest.SharedRedis(t)
	limit := sluice.Limit{Rate: 100, Period: 250 * time.Millisecond, Burst: 1}
	calls := builtins.RunLoad(t, builtins.Load{
		Algorithm: "slidingcounter", Backend: "go-redis", Addr: server.Addr(),
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
	require.LessOrEqual(t, worst, 2*int(limit.Rate), "more than 2 × Rate within one Period")
	require.LessOrEqual(t, float64(len(allowed)), ideal+2*float64(limit.Rate))
	require.GreaterOrEqual(t, float64(len(allowed)), 0.9*owed)
}
