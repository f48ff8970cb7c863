package builtins

import (
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// us is a microsecond, for the vectors' exact times.
const us = time.Microsecond

func allowed(remaining int64, resetAfter time.Duration) sluice.Decision {
	return sluice.Decision{Allowed: true, Remaining: remaining, ResetAfter: resetAfter}
}

func denied(remaining int64, retryAfter, resetAfter time.Duration) sluice.Decision {
	return sluice.Decision{Remaining: remaining, RetryAfter: retryAfter, ResetAfter: resetAfter}
}

var tenPerSecondBurst5 = sluice.Limit{Rate: 10, Period: time.Second, Burst: 5} // one token per 100 ms

// bucketVectors hold for the token bucket and GCRA alike: the two make the
// same decisions.
var bucketVectors = []sluicetest.Vector{
	{Name: "burst, deny, retry exactly at RetryAfter, partial refill", Limit: tenPerSecondBurst5, Steps: []sluicetest.Step{
		{N: 1, Want: allowed(4, 100*time.Millisecond)},
		{N: 1, Want: allowed(3, 200*time.Millisecond)},
		{N: 1, Want: allowed(2, 300*time.Millisecond)},
		{N: 1, Want: allowed(1, 400*time.Millisecond)},
		{N: 1, Want: allowed(0, 500*time.Millisecond)},
		{N: 1, Want: denied(0, 100*time.Millisecond, 500*time.Millisecond)},
		{Advance: 99999 * us, N: 1, Want: denied(0, 1*us, 400001*us)},
		{Advance: 1 * us, N: 1, Want: allowed(0, 500*time.Millisecond)},
		{Advance: 250 * time.Millisecond, N: 0, Want: allowed(2, 250*time.Millisecond)},
		{Advance: 10 * time.Second, N: 0, Want: allowed(5, 0)},
	}},
	{Name: "weighted cost", Limit: tenPerSecondBurst5, Steps: []sluicetest.Step{
		{N: 3, Want: allowed(2, 300*time.Millisecond)},
		{N: 3, Want: denied(2, 100*time.Millisecond, 300*time.Millisecond)},
		{N: 2, Want: allowed(0, 500*time.Millisecond)},
		{Advance: 150 * time.Millisecond, N: 2, Want: denied(1, 50*time.Millisecond, 350*time.Millisecond)},
	}},
	{Name: "cost equal to burst", Limit: tenPerSecondBurst5, Steps: []sluicetest.Step{
		{N: 5, Want: allowed(0, 500*time.Millisecond)},
		{N: 5, Want: denied(0, 500*time.Millisecond, 500*time.Millisecond)},
		{Advance: 500 * time.Millisecond, N: 5, Want: allowed(0, 500*time.Millisecond)},
	}},
	{Name: "interval rounded up to whole microseconds", Limit: sluice.Limit{Rate: 3, Period: time.Second, Burst: 5}, Steps: []sluicetest.Step{
		// ceil(1 s / 3) = 333334 µs per token: a full burst still fits.
		{N: 1, Want: allowed(4, 333334*us)},
		{N: 4, Want: allowed(0, 1666670*us)},
		{N: 1, Want: denied(0, 333334*us, 1666670*us)},
		// After 1 s, 666670 µs of deficit remain: 2 whole tokens, not 3.
		{Advance: time.Second, N: 0, Want: allowed(2, 666670*us)},
	}},
	{Name: "peek on an empty bucket", Limit: sluice.Limit{Rate: 1, Period: time.Second, Burst: 1}, Steps: []sluicetest.Step{
		{N: 1, Want: allowed(0, time.Second)},
		{N: 0, Want: denied(0, time.Second, time.Second)},
		{N: 0, Want: denied(0, time.Second, time.Second)},
		{Advance: time.Second, N: 0, Want: allowed(1, 0)},
	}},
	{Name: "idle for years", Limit: tenPerSecondBurst5, Steps: []sluicetest.Step{
		{N: 5, Want: allowed(0, 500*time.Millisecond)},
		{Advance: 3 * 366 * 24 * time.Hour, N: 1, Want: allowed(4, 100*time.Millisecond)},
		{Advance: 20 * 366 * 24 * time.Hour, N: 5, Want: allowed(0, 500*time.Millisecond)},
	}},
	{Name: "clock going backwards mints no tokens", Limit: tenPerSecondBurst5, Steps: []sluicetest.Step{
		{N: 2, Want: allowed(3, 200*time.Millisecond)},
		{Advance: -10 * time.Second, N: 0, Want: denied(0, 9800*time.Millisecond, 10200*time.Millisecond)},
		{N: 1, Want: denied(0, 9800*time.Millisecond, 10200*time.Millisecond)},
		{Advance: 10 * time.Second, N: 0, Want: allowed(3, 200*time.Millisecond)},
	}},
	{Name: "keys are isolated", Limit: tenPerSecondBurst5, Steps: []sluicetest.Step{
		{N: 5, Want: allowed(0, 500*time.Millisecond)},
		{Key: "other", N: 1, Want: allowed(4, 100*time.Millisecond)},
		{N: 1, Want: denied(0, 100*time.Millisecond, 500*time.Millisecond)},
	}},
	{Name: "limit changed mid-stream", Limit: tenPerSecondBurst5, Steps: []sluicetest.Step{
		{N: 3, Want: allowed(2, 300*time.Millisecond)},
		{Limit: sluice.Limit{Rate: 10, Period: time.Second, Burst: 10}, N: 0, Want: allowed(7, 300*time.Millisecond)},
		{Limit: sluice.Limit{Rate: 10, Period: time.Second, Burst: 2}, N: 0, Want: denied(0, 200*time.Millisecond, 300*time.Millisecond)},
	}},
	{Name: "refund", Limit: tenPerSecondBurst5, Steps: []sluicetest.Step{
		{N: 5, Want: allowed(0, 500*time.Millisecond)},
		{N: 2, Refund: true, Want: allowed(2, 300*time.Millisecond)},
		{N: 2, Want: allowed(0, 500*time.Millisecond)},
		// A refund never fills the bucket past full.
		{Advance: 200 * time.Millisecond, N: 5, Refund: true, Want: allowed(5, 0)},
		{N: 5, Want: allowed(0, 500*time.Millisecond)},
	}},
}

// At Epoch, a one-second window has run for 123457 µs and ends in 876543 µs.
var threePerSecond = sluice.Limit{Rate: 3, Period: time.Second, Burst: 3}

var fixedWindowVectors = []sluicetest.Vector{
	{Name: "window fills, denies until it ends, then starts over", Limit: threePerSecond, Steps: []sluicetest.Step{
		{N: 1, Want: allowed(2, 876543*us)},
		{N: 2, Want: allowed(0, 876543*us)},
		{N: 1, Want: denied(0, 876543*us, 876543*us)},
		{Advance: 876542 * us, N: 0, Want: denied(0, 1*us, 1*us)},
		{Advance: 1 * us, N: 0, Want: allowed(3, 0)},
		{N: 3, Want: allowed(0, time.Second)},
	}},
	{Name: "boundary burst: twice the rate within a microsecond", Limit: threePerSecond, Steps: []sluicetest.Step{
		{Advance: 876542 * us, N: 3, Want: allowed(0, 1*us)},
		{Advance: 1 * us, N: 3, Want: allowed(0, time.Second)},
	}},
	{Name: "weighted cost larger than what remains", Limit: threePerSecond, Steps: []sluicetest.Step{
		{N: 2, Want: allowed(1, 876543*us)},
		{N: 2, Want: denied(1, 876543*us, 876543*us)},
		{N: 1, Want: allowed(0, 876543*us)},
	}},
	{Name: "burst is not used", Limit: sluice.Limit{Rate: 3, Period: time.Second, Burst: 1}, Steps: []sluicetest.Step{
		{N: 3, Want: allowed(0, 876543*us)},
	}},
	{Name: "refund", Limit: threePerSecond, Steps: []sluicetest.Step{
		{N: 3, Want: allowed(0, 876543*us)},
		{N: 2, Refund: true, Want: allowed(2, 876543*us)},
		{N: 2, Want: allowed(0, 876543*us)},
		{N: 3, Refund: true, Want: allowed(3, 0)},
	}},
	{Name: "clock going backwards keeps the later window", Limit: threePerSecond, Steps: []sluicetest.Step{
		{N: 3, Want: allowed(0, 876543*us)},
		{Advance: -2 * time.Second, N: 1, Want: denied(0, 2876543*us, 2876543*us)},
	}},
	{Name: "keys are isolated", Limit: threePerSecond, Steps: []sluicetest.Step{
		{N: 3, Want: allowed(0, 876543*us)},
		{Key: "other", N: 1, Want: allowed(2, 876543*us)},
	}},
}

var tenPerSecond = sluice.Limit{Rate: 10, Period: time.Second, Burst: 10}

var slidingCounterVectors = []sluicetest.Vector{
	{Name: "the previous window fades out", Limit: tenPerSecond, Steps: []sluicetest.Step{
		{N: 10, Want: allowed(0, 1876543*us)},
		// 10 + 1 > 10 in this window: next window, once 10 × (1 − e) + 1 <= 10,
		// that is e >= 100 ms into it: 876543 + 100000 µs from now.
		{N: 1, Want: denied(0, 976543*us, 1876543*us)},
		{Advance: 976543 * us, N: 1, Want: allowed(0, 1900000*us)},
		// 100 ms later the previous window weighs 8: 8 + 1 + 1 <= 10.
		{Advance: 100 * time.Millisecond, N: 0, Want: allowed(1, 1800000*us)},
		{Advance: 2 * time.Second, N: 0, Want: allowed(10, 0)},
	}},
	{Name: "retry later in the same window", Limit: tenPerSecond, Steps: []sluicetest.Step{
		{N: 8, Want: allowed(2, 1876543*us)},
		// Next window at 0: 8 × 1 + 0 + 3 > 10; at e: 8 × (1 − e) + 3 <= 10
		// from e = 125 ms.
		{Advance: 876543 * us, N: 3, Want: denied(2, 125*time.Millisecond, time.Second)},
		{Advance: 125 * time.Millisecond, N: 3, Want: allowed(0, 1875*time.Millisecond)},
	}},
	{Name: "refund", Limit: tenPerSecond, Steps: []sluicetest.Step{
		{N: 4, Want: allowed(6, 1876543*us)},
		{N: 3, Refund: true, Want: allowed(9, 1876543*us)},
		{N: 1, Refund: true, Want: allowed(10, 0)},
	}},
	{Name: "clock going backwards keeps the later window", Limit: tenPerSecond, Steps: []sluicetest.Step{
		{N: 10, Want: allowed(0, 1876543*us)},
		{Advance: -3 * time.Second, N: 1, Want: denied(0, 3976543*us, 4876543*us)},
	}},
	{Name: "keys are isolated", Limit: tenPerSecond, Steps: []sluicetest.Step{
		{N: 10, Want: allowed(0, 1876543*us)},
		{Key: "other", N: 1, Want: allowed(9, 1876543*us)},
	}},
}

var slidingLogVectors = []sluicetest.Vector{
	{Name: "entries leave the window one by one", Limit: threePerSecond, Steps: []sluicetest.Step{
		{N: 1, Want: allowed(2, time.Second)},
		{Advance: 100 * time.Millisecond, N: 1, Want: allowed(1, time.Second)},
		{Advance: 100 * time.Millisecond, N: 1, Want: allowed(0, time.Second)},
		{Advance: 100 * time.Millisecond, N: 1, Want: denied(0, 700*time.Millisecond, 900*time.Millisecond)},
		{Advance: 699999 * us, N: 1, Want: denied(0, 1*us, 200001*us)},
		{Advance: 1 * us, N: 1, Want: allowed(0, time.Second)},
	}},
	{Name: "requests in the same microsecond do not collide", Limit: threePerSecond, Steps: []sluicetest.Step{
		{N: 2, Want: allowed(1, time.Second)},
		{N: 1, Want: allowed(0, time.Second)},
		{N: 1, Want: denied(0, time.Second, time.Second)},
		{N: 2, Refund: true, Want: allowed(2, time.Second)},
		{N: 2, Want: allowed(0, time.Second)},
		{Advance: time.Second, N: 0, Want: allowed(3, 0)},
	}},
	{Name: "weighted cost waits for enough entries to leave", Limit: threePerSecond, Steps: []sluicetest.Step{
		{N: 1, Want: allowed(2, time.Second)},
		{Advance: 400 * time.Millisecond, N: 2, Want: allowed(0, time.Second)},
		{Advance: 100 * time.Millisecond, N: 2, Want: denied(0, 900*time.Millisecond, 900*time.Millisecond)},
	}},
	{Name: "clock going backwards counts later entries", Limit: threePerSecond, Steps: []sluicetest.Step{
		{N: 3, Want: allowed(0, time.Second)},
		{Advance: -10 * time.Second, N: 1, Want: denied(0, 11*time.Second, 11*time.Second)},
	}},
	{Name: "keys are isolated", Limit: threePerSecond, Steps: []sluicetest.Step{
		{N: 3, Want: allowed(0, time.Second)},
		{Key: "other", N: 1, Want: allowed(2, time.Second)},
	}},
}
