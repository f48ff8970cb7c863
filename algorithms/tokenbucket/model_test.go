package tokenbucket

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzModelProperties checks the model against the token bucket's
// definition for arbitrary limits, states and costs:
//   - a request is allowed exactly when its cost fits the tokens that
//     Remaining reports before it;
//   - RetryAfter is honest and tight: retrying at now + RetryAfter is
//     allowed, one microsecond earlier is not;
//   - Remaining never exceeds Burst and ResetAfter is the stored deficit.
func FuzzModelProperties(f *testing.F) {
	f.Add(int64(10), int64(1_000_000), int64(5), int64(1), int64(0), int64(0))
	f.Add(int64(3), int64(1_000_000), int64(5), int64(5), int64(1_000_000), int64(500_000))
	f.Add(int64(1), int64(1000), int64(1), int64(1), int64(-50), int64(7))
	f.Add(int64(999_999), int64(1_000_000), int64(1_000_000), int64(1), int64(123), int64(999_999))
	f.Fuzz(func(t *testing.T, rate, periodUs, burst, cost, deficit, elapsed int64) {
		p := params{rate: rate, periodUs: periodUs, burst: burst, cost: cost}
		interval, tolerance, err := p.check()
		if err != nil {
			return // not a valid input for the script; nothing to check
		}
		if deficit < -tolerance || deficit > 2*tolerance || elapsed < 0 || elapsed > tolerance {
			return // not a valid input for the script; nothing to check
		}
		const now = int64(1_767_225_600_123_457)
		tat := now + deficit
		before := decide(params{rate: rate, periodUs: periodUs, burst: burst}, interval, tolerance, tat, true, now)
		r := decide(p, interval, tolerance, tat, true, now)

		require.LessOrEqual(t, r.remaining, burst)
		require.GreaterOrEqual(t, r.remaining, int64(0))
		if cost > 0 {
			require.Equal(t, cost <= before.remaining, r.allowed, "allowed iff cost fits the remaining tokens")
		}
		if r.allowed {
			require.Zero(t, r.retryAfterUs)
			require.Equal(t, cost > 0, r.write, "an admission writes, a peek does not")
			if r.write {
				require.Equal(t, max(deficit, 0)+cost*interval, r.deficitUs)
				require.Equal(t, before.remaining-cost, r.remaining)
				require.Greater(t, r.ttlMs*1000, r.deficitUs, "the TTL outlives the deficit")
			}
			return
		}
		require.False(t, r.write, "a denial writes nothing")
		require.Positive(t, r.retryAfterUs)
		later := decide(p, interval, tolerance, tat, true, now+r.retryAfterUs)
		require.True(t, later.allowed, "retry at RetryAfter is allowed")
		earlier := decide(p, interval, tolerance, tat, true, now+r.retryAfterUs-1)
		require.False(t, earlier.allowed, "retry before RetryAfter is denied")
	})
}

// TestModelNeverAdmitsMoreThanTheLimit drives the model with a request at
// every step of a dense schedule and checks, over every prefix, that the
// admitted cost is at most Burst + elapsed / interval.
func TestModelNeverAdmitsMoreThanTheLimit(t *testing.T) {
	for _, p := range []params{
		{rate: 10, periodUs: 1_000_000, burst: 5},
		{rate: 3, periodUs: 1_000_000, burst: 5},
		{rate: 1000, periodUs: 1_000, burst: 1},
		{rate: 7, periodUs: 60_000_000, burst: 100},
	} {
		interval, tolerance, err := p.check()
		require.NoError(t, err)
		start := int64(1_767_225_600_123_457)
		var tat int64
		var has bool
		var admitted int64
		for i := range int64(20_000) {
			now := start + i*interval/7
			q := p
			q.cost = 1 + i%p.burst
			r := decide(q, interval, tolerance, tat, has, now)
			if r.allowed {
				admitted += q.cost
				tat, has = now+r.deficitUs, true
			}
			require.LessOrEqual(t, admitted, p.burst+(now-start)/interval, "params %+v at step %d", p, i)
		}
	}
}
