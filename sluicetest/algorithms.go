package sluicetest

import (
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/fixedwindow"
	"github.com/sluicehq/sluice/algorithms/gcra"
	"github.com/sluicehq/sluice/algorithms/slidingcounter"
	"github.com/sluicehq/sluice/algorithms/slidinglog"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
)

// Limiter is what every Sluice algorithm offers on its concrete type.
type Limiter interface {
	sluice.Limiter
	sluice.BatchLimiter
	sluice.Refunder
	sluice.Resetter
	sluice.Bounded
}

// Algorithm describes one algorithm to the conformance suite.
type Algorithm struct {
	Name string
	// New builds the limiter; a nil clock means the server clock.
	New func(store sluice.Store, clock sluice.Clock) (Limiter, error)
	// Script is the decision script, for calls with raw arguments.
	Script *sluice.Script
	// KeySuffix names the state key: the caller's key plus the suffix.
	KeySuffix string
	// IntegerState says the state key holds one integer, Unix
	// microseconds of a future time (the bucket algorithms).
	IntegerState bool
	// Capacity is the largest cost a limit allows: Burst or Rate.
	Capacity func(sluice.Limit) int64
	// Vectors are the algorithm's hand-worked decisions.
	Vectors []Vector
	// Limits are valid limits for the random sequences.
	Limits []sluice.Limit
}

func byBurst(l sluice.Limit) int64 { return l.Burst }
func byRate(l sluice.Limit) int64  { return l.Rate }

func newWith[L Limiter, O any](newFn func(sluice.Store, ...O) (L, error), withClock func(sluice.Clock) O) func(sluice.Store, sluice.Clock) (Limiter, error) {
	return func(store sluice.Store, clock sluice.Clock) (Limiter, error) {
		var opts []O
		if clock != nil {
			opts = append(opts, withClock(clock))
		}
		return newFn(store, opts...)
	}
}

var bucketLimits = []sluice.Limit{
	{Rate: 10, Period: time.Second, Burst: 5},
	{Rate: 3, Period: time.Second, Burst: 7},
	{Rate: 100, Period: time.Minute, Burst: 1},
	{Rate: 1000, Period: time.Second, Burst: 1000},
	{Rate: 7, Period: 13 * time.Millisecond, Burst: 3},
}

var windowLimits = []sluice.Limit{
	{Rate: 10, Period: time.Second, Burst: 10},
	{Rate: 3, Period: time.Second, Burst: 1},
	{Rate: 100, Period: time.Minute, Burst: 100},
	{Rate: 1000, Period: time.Second, Burst: 1},
	{Rate: 7, Period: 13 * time.Millisecond, Burst: 7},
}

// Algorithms lists every algorithm Sluice ships, for the conformance suite
// and the benchmarks.
var Algorithms = []Algorithm{
	{
		Name: "tokenbucket", New: newWith(tokenbucket.New, tokenbucket.WithClock), Script: tokenbucket.Script(),
		KeySuffix: tokenbucket.KeySuffix, IntegerState: true, Capacity: byBurst,
		Vectors: bucketVectors, Limits: bucketLimits,
	},
	{
		Name: "gcra", New: newWith(gcra.New, gcra.WithClock), Script: gcra.Script(),
		KeySuffix: gcra.KeySuffix, IntegerState: true, Capacity: byBurst,
		Vectors: bucketVectors, Limits: bucketLimits,
	},
	{
		Name: "fixedwindow", New: newWith(fixedwindow.New, fixedwindow.WithClock), Script: fixedwindow.Script(),
		KeySuffix: fixedwindow.KeySuffix, Capacity: byRate,
		Vectors: fixedWindowVectors, Limits: windowLimits,
	},
	{
		Name: "slidingcounter", New: newWith(slidingcounter.New, slidingcounter.WithClock), Script: slidingcounter.Script(),
		KeySuffix: slidingcounter.KeySuffix, Capacity: byRate,
		Vectors: slidingCounterVectors, Limits: windowLimits,
	},
	{
		Name: "slidinglog", New: newWith(slidinglog.New, slidinglog.WithClock), Script: slidinglog.Script(),
		KeySuffix: slidinglog.KeySuffix, Capacity: byRate,
		Vectors: slidingLogVectors, Limits: windowLimits,
	},
}
