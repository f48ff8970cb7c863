package builtins

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/fixedwindow"
	"github.com/sluicehq/sluice/algorithms/gcra"
	"github.com/sluicehq/sluice/algorithms/slidingcounter"
	"github.com/sluicehq/sluice/algorithms/slidinglog"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/scripttest"
)

func byBurst(l sluice.Limit) int64 { return l.Burst }
func byRate(l sluice.Limit) int64  { return l.Rate }

func newWith[L sluicetest.Limiter, O any](newFn func(sluice.Store, ...O) (L, error), withClock func(sluice.Clock) O) func(sluice.Store, sluice.Clock) (sluicetest.Limiter, error) {
	return func(store sluice.Store, clock sluice.Clock) (sluicetest.Limiter, error) {
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
var Algorithms = []sluicetest.Algorithm{
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

// Algorithm returns the built-in algorithm called name, or false.
func Algorithm(name string) (sluicetest.Algorithm, bool) {
	for _, a := range Algorithms {
		if a.Name == name {
			return a, true
		}
	}
	return sluicetest.Algorithm{}, false
}

// FuzzScriptMatchesModel is scripttest.FuzzScriptMatchesModel for the
// built-in algorithm called name.
func FuzzScriptMatchesModel(f *testing.F, name string) {
	alg, ok := Algorithm(name)
	if !ok {
		f.Fatalf("no built-in algorithm %q", name)
	}
	scripttest.FuzzScriptMatchesModel(f, alg)
}
