package multilimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/multilimit"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestOnePassDecidesAsTwoPasses: a call whose checks are all of
// algorithms given as steps runs the one-pass script (StepScript), and
// decides, on every tier, exactly as the two-pass script (Script) does
// on keys of its own given the same calls: allowed, which limit denied,
// and each limit's figures, through admissions, denials that consume
// nothing, peeks and refills.
func TestOnePassDecidesAsTwoPasses(t *testing.T) {
	for name, newTier := range tiers() {
		t.Run(name, func(t *testing.T) {
			tier := newTier(t)
			clock := sluicetest.NewFakeClock(sluicetest.Epoch)
			ml, err := multilimit.New(tier.Store, multilimit.WithClock(clock))
			require.NoError(t, err)
			tenant := sluicetest.UniqueKey(t)
			limits := []struct {
				limit     sluice.Limit
				algorithm multilimit.Algorithm
				suffix    string
			}{
				{sluice.Limit{Rate: 4, Period: time.Second, Burst: 3}, multilimit.TokenBucket, ":tb"},
				{sluice.Limit{Rate: 10, Period: time.Second, Burst: 5}, multilimit.GCRA, ":gcra"},
				{sluice.Limit{Rate: 2, Period: time.Second, Burst: 6}, multilimit.TokenBucket, ":tb"},
			}
			checks := make([]multilimit.Check, len(limits))
			twinKeys := make([]string, len(limits))
			for i, l := range limits {
				name := string(rune('a' + i))
				checks[i] = multilimit.Check{Key: sluice.Key(tenant, name), Limit: l.limit, Algorithm: l.algorithm}
				twinKeys[i] = sluice.Key(tenant, "two-pass", name) + l.suffix
			}
			denials := 0
			for i, n := range []int64{1, 2, 1, 0, 1, 1, 3, 0, 1, 2, 1, 1, 1, 0, 2, 1} {
				args := []int64{n}
				for _, l := range limits {
					args = append(args, l.limit.Rate, l.limit.PeriodMicros(), l.limit.Burst*8+algorithmID[string(l.algorithm)])
				}
				args = append(args, clock.Now().UnixMicro())
				want, err := tier.Store.Run(t.Context(), multilimit.Script(), twinKeys, args)
				require.NoError(t, err)
				got, err := ml.AllowN(t.Context(), checks, n)
				require.NoError(t, err)
				gotReply := []int64{boolInt(got.Allowed), int64(got.Denied + 1)}
				for _, d := range got.Limits {
					gotReply = append(gotReply, d.Remaining, d.RetryAfter.Microseconds(), d.ResetAfter.Microseconds())
				}
				require.Equal(t, want, gotReply, "call %d", i)
				if !got.Allowed {
					denials++
				}
				clock.Advance(70 * time.Millisecond)
			}
			require.Positive(t, denials, "the calls reach a denial")
		})
	}
}
