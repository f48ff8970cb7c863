package firstwindow_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/examples/plugin/firstwindow"
	"github.com/sluicehq/sluice/ext/algorithm"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/sluicetest/scripttest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

var threePerSecond = sluice.Limit{Rate: 3, Period: time.Second, Burst: 3}

func allowed(remaining int64, resetAfter time.Duration) sluice.Decision {
	return sluice.Decision{Allowed: true, Remaining: remaining, ResetAfter: resetAfter}
}

func denied(remaining int64, retryAfter, resetAfter time.Duration) sluice.Decision {
	return sluice.Decision{Remaining: remaining, RetryAfter: retryAfter, ResetAfter: resetAfter}
}

// Algorithm describes firstwindow to Sluice's conformance kit.
var Algorithm = sluicetest.Algorithm{
	Name: "firstwindow",
	New: func(store sluice.Store, clock sluice.Clock) (sluicetest.Limiter, error) {
		var opts []algorithm.Option
		if clock != nil {
			opts = append(opts, algorithm.WithClock(clock))
		}
		return firstwindow.New(store, opts...)
	},
	Script:    firstwindow.Script(),
	KeySuffix: firstwindow.KeySuffix,
	Capacity:  func(l sluice.Limit) int64 { return l.Rate },
	Limits: []sluice.Limit{
		{Rate: 10, Period: time.Second, Burst: 10},
		{Rate: 3, Period: time.Second, Burst: 1},
		{Rate: 100, Period: time.Minute, Burst: 100},
		{Rate: 7, Period: 13 * time.Millisecond, Burst: 7},
	},
	Vectors: []sluicetest.Vector{
		{Name: "the window opens at the first request", Limit: threePerSecond, Steps: []sluicetest.Step{
			{Advance: 400 * time.Millisecond, N: 1, Want: allowed(2, time.Second)},
			{Advance: 100 * time.Millisecond, N: 1, Want: allowed(1, 900*time.Millisecond)},
			{Advance: 100 * time.Millisecond, N: 1, Want: allowed(0, 800*time.Millisecond)},
			{Advance: 100 * time.Millisecond, N: 1, Want: denied(0, 700*time.Millisecond, 700*time.Millisecond)},
			// A clock-aligned window would have reset at the second; this
			// one lasts a second from its first request.
			{Advance: 699999 * time.Microsecond, N: 1, Want: denied(0, time.Microsecond, time.Microsecond)},
			{Advance: time.Microsecond, N: 1, Want: allowed(2, time.Second)},
		}},
		{Name: "refund and peek", Limit: threePerSecond, Steps: []sluicetest.Step{
			{N: 3, Want: allowed(0, time.Second)},
			{N: 0, Want: denied(0, time.Second, time.Second)},
			{Advance: 200 * time.Millisecond, N: 2, Refund: true, Want: allowed(2, 800*time.Millisecond)},
			{N: 2, Want: allowed(0, 800*time.Millisecond)},
			{Advance: 800 * time.Millisecond, N: 0, Want: allowed(3, 0)},
		}},
	},
}

// TestConformance holds firstwindow to Sluice's contract on every tier:
// its Go twin in process, its Lua on the embedded miniredis, on a
// redis-server and on a Redis Cluster, through go-redis and rueidis.
func TestConformance(t *testing.T) {
	for _, tier := range redistest.AllTiers() {
		t.Run(tier.Name, func(t *testing.T) { sluicetest.RunConformance(t, tier.Make, Algorithm) })
	}
}

// FuzzScriptMatchesModel: the Lua on a redis-server against the Go twin.
//
//	go test -run '^$' -fuzz FuzzScriptMatchesModel ./firstwindow/
func FuzzScriptMatchesModel(f *testing.F) { scripttest.FuzzScriptMatchesModel(f, Algorithm) }
