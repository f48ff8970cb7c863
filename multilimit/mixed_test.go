package multilimit_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/fixedwindow"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/multilimit"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/redistest"
)

// TestMixedAlgorithms: a token bucket per second and a fixed window per
// minute in one call, on every tier, with hand-worked steps; then random
// calls over all five algorithms against the Go model.
func TestMixedAlgorithms(t *testing.T) {
	perMinuteWindow := sluice.PerMinute(8)
	for name, newTier := range tiers() {
		t.Run(name, func(t *testing.T) {
			tier := newTier(t)
			clock := sluicetest.NewFakeClock(sluicetest.Epoch) // 0.123457 s into a minute
			l, err := multilimit.New(tier.Store, multilimit.WithClock(clock))
			require.NoError(t, err)
			tenant := sluicetest.UniqueKey(t)
			cs := []multilimit.Check{
				{Key: sluice.Key(tenant, "per-second"), Limit: perSecond}, // the default: token bucket
				{Key: sluice.Key(tenant, "per-minute"), Limit: perMinuteWindow, Algorithm: multilimit.FixedWindow},
			}
			for i := range 5 {
				d, err := l.AllowN(t.Context(), cs, 1)
				require.NoError(t, err)
				require.True(t, d.Allowed)
				require.Equal(t, int64(4-i), d.Limits[0].Remaining)
				require.Equal(t, int64(7-i), d.Limits[1].Remaining)
			}
			d, err := l.AllowN(t.Context(), cs, 1)
			require.NoError(t, err)
			require.False(t, d.Allowed)
			require.Equal(t, 0, d.Denied)
			require.Equal(t, 200*time.Millisecond, d.RetryAfter)
			require.Equal(t, int64(3), d.Limits[1].Remaining, "the window was not consumed")

			// A second later the bucket is full, but the window has 3 left.
			clock.Advance(time.Second)
			d, err = l.AllowN(t.Context(), cs, 4)
			require.NoError(t, err)
			require.False(t, d.Allowed)
			require.Equal(t, 1, d.Denied, "the fixed window denied")
			require.Equal(t, 58876543*time.Microsecond, d.RetryAfter, "until the minute ends")
			require.Equal(t, int64(5), d.Limits[0].Remaining, "the bucket was not consumed")
			require.Zero(t, d.Limits[0].RetryAfter)

			// The window's state is fixedwindow.Limiter's own.
			fw, err := fixedwindow.New(tier.Store, fixedwindow.WithClock(clock))
			require.NoError(t, err)
			p, err := fw.AllowN(t.Context(), cs[1].Key, perMinuteWindow, 0)
			require.NoError(t, err)
			require.Equal(t, int64(3), p.Remaining)

			// Retrying at RetryAfter succeeds.
			clock.Advance(d.RetryAfter)
			d, err = l.AllowN(t.Context(), cs, 4)
			require.NoError(t, err)
			require.True(t, d.Allowed)
			require.Equal(t, int64(1), d.Limits[0].Remaining)
			require.Equal(t, int64(4), d.Limits[1].Remaining)

			// Random calls over all five algorithms against the model.
			model, err := multilimit.New(newMemStore(t), multilimit.WithClock(clock))
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
			all := []multilimit.Check{
				{Key: sluice.Key(tenant+":random", "tb"), Limit: perSecond, Algorithm: multilimit.TokenBucket},
				{Key: sluice.Key(tenant+":random", "gcra"), Limit: sluice.PerSecond(4), Algorithm: multilimit.GCRA},
				{Key: sluice.Key(tenant+":random", "fw"), Limit: sluice.PerSecond(6), Algorithm: multilimit.FixedWindow},
				{Key: sluice.Key(tenant+":random", "sc"), Limit: sluice.PerSecond(7), Algorithm: multilimit.SlidingCounter},
				{Key: sluice.Key(tenant+":random", "sl"), Limit: sluice.PerSecond(5), Algorithm: multilimit.SlidingLog},
			}
			for i := range 300 {
				clock.Advance(time.Duration(rng.Int64N(int64(250*time.Millisecond))) - 10*time.Millisecond)
				picked := slices.Clone(all)
				rng.Shuffle(len(picked), func(a, b int) { picked[a], picked[b] = picked[b], picked[a] })
				picked = picked[:1+rng.IntN(len(picked))]
				n := rng.Int64N(4)
				got, err := l.AllowN(t.Context(), picked, n)
				require.NoError(t, err)
				want, err := model.AllowN(t.Context(), picked, n)
				require.NoError(t, err)
				require.Equal(t, want, got, "step %d", i)
			}
		})
	}
}

func TestBadChecks(t *testing.T) {
	l, err := multilimit.New(newMemStore(t))
	require.NoError(t, err)
	k := sluice.Key("t", "a")
	_, err = l.AllowN(t.Context(), []multilimit.Check{{Key: k, Limit: perSecond, Algorithm: "leaky"}}, 1)
	require.ErrorIs(t, err, sluice.ErrInvalidLimit)
	require.ErrorContains(t, err, `unknown algorithm "leaky"`)

	_, err = l.AllowN(t.Context(), []multilimit.Check{{Key: k, Limit: perSecond}, {Key: k, Limit: perMinute, Algorithm: multilimit.TokenBucket}}, 1)
	require.ErrorIs(t, err, sluice.ErrInvalidKey, "one state twice in a call")
	d, err := l.AllowN(t.Context(), []multilimit.Check{{Key: k, Limit: perSecond}, {Key: k, Limit: perMinute, Algorithm: multilimit.GCRA}}, 1)
	require.NoError(t, err, "one key under two algorithms is two states")
	require.True(t, d.Allowed)

	_, err = l.AllowN(t.Context(), []multilimit.Check{{Key: k, Limit: sluice.PerSecond(3).WithBurst(10), Algorithm: multilimit.FixedWindow}}, 4)
	require.ErrorIs(t, err, sluice.ErrCostExceedsBurst, "a window allows at most its rate")
	_, err = l.AllowN(t.Context(), []multilimit.Check{{Key: k, Limit: sluice.PerSecond(20_000), Algorithm: multilimit.SlidingLog}}, 1)
	require.ErrorIs(t, err, sluice.ErrInvalidLimit, "a sliding log allows a rate of at most 10,000")
	_, err = l.AllowN(t.Context(), []multilimit.Check{{Key: k, Limit: sluice.Limit{Rate: 700, Period: time.Millisecond, Burst: 1}, Algorithm: multilimit.GCRA}}, 1)
	require.ErrorIs(t, err, sluice.ErrInvalidLimit, "an emission interval not within 1%")
	_, err = l.AllowN(t.Context(), []multilimit.Check{{Key: k, Limit: perSecond}}, -1)
	require.ErrorIs(t, err, sluice.ErrInvalidCost)
}

// TestScriptRejectsBadArguments: both scripts check what the Go side
// checks, before any write, for callers that reach them directly; the
// one-pass script also refuses an algorithm not given as steps.
func TestScriptRejectsBadArguments(t *testing.T) {
	for name, newTier := range map[string]func(t *testing.T) sluicetest.Tier{
		"memstore": sluicetest.MemTier,
		"redis": func(t *testing.T) sluicetest.Tier {
			return redistest.RueidisTier(t, redistest.SharedRedis(t))
		},
		"redis/decimal": func(t *testing.T) sluicetest.Tier {
			return redistest.DecimalTier(t, redistest.SharedRedis(t))
		},
	} {
		t.Run(name, func(t *testing.T) {
			tier := newTier(t)
			k := sluice.Key(sluicetest.UniqueKey(t), "x")
			type badCall struct {
				keys []string
				args []int64
				want error
				code string // the error reply's, from the script and its Go twin alike
			}
			// Per limit: rate, period_us, burst x 8 + algorithm (41: a
			// burst of 5 and the token bucket).
			notStepped := []badCall{
				{[]string{k, k + ":2"}, []int64{1, 5, 1_000_000, 41, 5, 1_000_000, 43}, sluice.ErrInvalidLimit, ext.CodeInvalidLimit}, // a fixed window
			}
			for _, script := range []*sluice.Script{multilimit.Script(), multilimit.StepScript()} {
				cases := []badCall{
					{[]string{k}, []int64{1, 5, 1_000_000, 46}, sluice.ErrInvalidLimit, ext.CodeInvalidLimit},                  // algorithm 6
					{[]string{k}, []int64{1, 5, 1_000_000, 40}, sluice.ErrInvalidLimit, ext.CodeInvalidLimit},                  // algorithm 0
					{[]string{k}, []int64{1, 5, 1_000_000, -7}, sluice.ErrInvalidLimit, ext.CodeInvalidLimit},                  // burst -1
					{[]string{k, k}, []int64{1, 5, 1_000_000, 41, 5, 1_000_000, 41}, sluice.ErrInvalidKey, ext.CodeInvalidKey}, // one key twice
					{[]string{k}, []int64{-1, 5, 1_000_000, 41}, sluice.ErrInvalidCost, ext.CodeInvalidCost},
					{[]string{k}, []int64{6, 5, 1_000_000, 41}, sluice.ErrCostExceedsBurst, ext.CodeCostExceedsBurst},
					{[]string{}, []int64{1}, sluice.ErrInvalidKey, ext.CodeInvalidKey},                             // no limit
					{[]string{k}, []int64{1, 5, 1_000_000}, sluice.ErrInvalidLimit, ext.CodeInvalidLimit},          // short
					{[]string{k}, []int64{}, sluice.ErrInvalidCost, ext.CodeInvalidCost},                           // no cost
					{[]string{k}, []int64{1, 20_000, 1_000_000, 45}, sluice.ErrInvalidLimit, ext.CodeInvalidLimit}, // sliding log rate
				}
				if script == multilimit.StepScript() {
					cases = append(cases, notStepped...)
				}
				for _, tc := range cases {
					_, err := tier.Store.Run(t.Context(), script, tc.keys, tc.args)
					require.ErrorIs(t, err, tc.want, "%v %v", tc.keys, tc.args)
					var se *ext.ServerError
					require.ErrorAs(t, err, &se, "%v %v: an error reply", tc.keys, tc.args)
					require.Equal(t, tc.code, se.Code, "%v %v", tc.keys, tc.args)
					for _, key := range []string{k, k + ":tb", k + ":sl", k + ":2"} {
						_, found, err := tier.Get(t.Context(), key)
						require.NoError(t, err)
						require.False(t, found, "nothing written")
					}
				}
			}
		})
	}
}
