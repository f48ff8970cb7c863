package tokenbucket

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/ext/algorithm"
)

// FuzzModelProperties checks the model against the token bucket's
// definition for arbitrary limits, deficits and costs:
//   - a request is allowed exactly when its cost fits the tokens that
//     Remaining reported before it, and then takes exactly those tokens;
//   - RetryAfter is honest and tight: the same request once the deficit has
//     shrunk by RetryAfter is allowed, one microsecond earlier it is not;
//   - a refund never fills the bucket past full;
//   - Remaining never exceeds Burst, ResetAfter is the stored deficit, and
//     only admissions and refunds write.
func FuzzModelProperties(f *testing.F) {
	f.Add(int64(10), int64(1_000_000), int64(5), int64(1), int64(0))
	f.Add(int64(3), int64(1_000_000), int64(5), int64(5), int64(1_000_000))
	f.Add(int64(1), int64(1000), int64(1), int64(-1), int64(7))
	f.Add(int64(500_000), int64(1_000_000), int64(1_000_000), int64(1), int64(999_999))
	f.Fuzz(func(t *testing.T, rate, periodUs, burst, cost, deficit int64) {
		a := algorithm.Args{Rate: rate, PeriodUs: periodUs, Burst: burst, Cost: cost}
		if rate < 1 || rate > periodUs || periodUs < 1000 || periodUs > 31_622_400_000_000 || burst < 1 || burst > 1e12 {
			return // rejected by the prelude; nothing to check
		}
		b, err := newBucket(a)
		if err != nil {
			return // rejected by the script; nothing to check
		}
		if deficit < 0 || deficit > 2*b.tolerance {
			return
		}
		before := b.take(deficit, 0, false)
		r := b.take(deficit, cost, false)

		require.LessOrEqual(t, r.reply.Remaining, burst)
		require.GreaterOrEqual(t, r.reply.Remaining, int64(0))
		require.Equal(t, r.deficit, r.reply.ResetAfterUs)
		switch {
		case cost < 0:
			require.True(t, r.reply.Allowed)
			require.True(t, r.write)
			require.Equal(t, max(deficit+cost*b.interval, 0), r.deficit, "a refund never fills past full")
			if deficit <= b.tolerance { // (beyond it, the clock went back)
				require.Equal(t, min(before.reply.Remaining-cost, burst), r.reply.Remaining)
			}
		case r.reply.Allowed && cost > 0:
			require.LessOrEqual(t, cost, before.reply.Remaining, "allowed only when the cost fits")
			require.True(t, r.write)
			require.Equal(t, deficit+cost*b.interval, r.deficit)
			require.Equal(t, before.reply.Remaining-cost, r.reply.Remaining)
		case r.reply.Allowed:
			require.False(t, r.write, "a peek writes nothing")
			require.Positive(t, before.reply.Remaining)
		default:
			require.False(t, r.write, "a denial writes nothing")
			require.Greater(t, max(cost, 1), before.reply.Remaining, "denied only when the cost does not fit")
			require.Positive(t, r.reply.RetryAfterUs)
			later := b.take(max(deficit-r.reply.RetryAfterUs, 0), cost, false)
			require.True(t, later.reply.Allowed, "retry at RetryAfter is allowed")
			earlier := b.take(deficit-r.reply.RetryAfterUs+1, cost, false)
			require.False(t, earlier.reply.Allowed, "retry before RetryAfter is denied")
		}
	})
}

// TestModelNeverAdmitsMoreThanTheLimit drives the model with a request at
// every step of a dense schedule and checks, over every prefix, that the
// admitted cost is at most Burst + elapsed / interval.
func TestModelNeverAdmitsMoreThanTheLimit(t *testing.T) {
	for _, a := range []algorithm.Args{
		{Rate: 10, PeriodUs: 1_000_000, Burst: 5},
		{Rate: 3, PeriodUs: 1_000_000, Burst: 5},
		{Rate: 1000, PeriodUs: 1_000, Burst: 1},
		{Rate: 7, PeriodUs: 60_000_000, Burst: 100},
	} {
		b, err := newBucket(a)
		require.NoError(t, err)
		start := int64(1_767_225_600_123_457)
		tat := start
		var admitted int64
		for i := range int64(20_000) {
			now := start + i*b.interval/7
			cost := 1 + i%a.Burst
			r := b.take(max(tat-now, 0), cost, false)
			if r.reply.Allowed {
				admitted += cost
				tat = now + r.deficit
			}
			require.LessOrEqual(t, admitted, a.Burst+(now-start)/b.interval, "%+v at step %d", a, i)
		}
	}
}
