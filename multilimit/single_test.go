package multilimit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/multilimit"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/builtins"
)

// TestOneCheckIsItsAlgorithmsDecision: a call of one check decides as
// that algorithm's own Limiter on the same key, on every tier: each
// decision equal, requests, peeks and denials alike, and each sees the
// other's consumption (one state key). The multi-limit script, which the
// call no longer runs for one check, replies the same figures for it.
func TestOneCheckIsItsAlgorithmsDecision(t *testing.T) {
	for name, newTier := range tiers() {
		t.Run(name, func(t *testing.T) {
			tier := newTier(t)
			for _, alg := range builtins.Algorithms {
				t.Run(alg.Name, func(t *testing.T) {
					clock := sluicetest.NewFakeClock(sluicetest.Epoch)
					ml, err := multilimit.New(tier.Store, multilimit.WithClock(clock))
					require.NoError(t, err)
					own, err := alg.New(tier.Store, clock)
					require.NoError(t, err)
					limit := sluice.Limit{Rate: 4, Period: time.Second, Burst: 4}
					key := sluice.Key(sluicetest.UniqueKey(t))
					twin := sluice.Key(sluicetest.UniqueKey(t) + ":twin")
					check := func(k string) []multilimit.Check {
						return []multilimit.Check{{Key: k, Limit: limit, Algorithm: multilimit.Algorithm(alg.Name)}}
					}
					viaScript := sluice.Key(sluicetest.UniqueKey(t)+":script") + alg.KeySuffix
					for i, n := range []int64{1, 2, 0, 1, 3, 1, 0, 2} {
						got, err := ml.AllowN(t.Context(), check(key), n)
						require.NoError(t, err)
						want, err := own.AllowN(t.Context(), twin, limit, n)
						require.NoError(t, err)
						require.Equal(t, want, got.Limits[0], "call %d", i)
						// The two passes of the multi-limit script decide one
						// limit as its own script does.
						reply, err := tier.Store.Run(t.Context(), multilimit.Script(), []string{viaScript},
							[]int64{n, limit.Rate, limit.PeriodMicros(), limit.Burst*8 + algorithmID[alg.Name], clock.Now().UnixMicro()})
						require.NoError(t, err)
						denied := int64(0)
						if !want.Allowed {
							denied = 1
						}
						require.Equal(t, []int64{boolInt(want.Allowed), denied, want.Remaining,
							want.RetryAfter.Microseconds(), want.ResetAfter.Microseconds()}, reply, "call %d", i)
						require.Equal(t, want.Allowed, got.Allowed, "call %d", i)
						if want.Allowed {
							require.Equal(t, -1, got.Denied, "call %d", i)
						} else {
							require.Equal(t, 0, got.Denied, "call %d", i)
							require.Equal(t, want.RetryAfter, got.RetryAfter, "call %d", i)
						}
						clock.Advance(90 * time.Millisecond)
					}
					// One state: what the Limiter consumes, the call sees.
					clock.Advance(2 * time.Second) // a full limit again
					before, err := ml.AllowN(t.Context(), check(key), 0)
					require.NoError(t, err)
					_, err = own.AllowN(t.Context(), key, limit, 1)
					require.NoError(t, err)
					after, err := ml.AllowN(t.Context(), check(key), 0)
					require.NoError(t, err)
					require.Equal(t, before.Limits[0].Remaining-1, after.Limits[0].Remaining)
				})
			}
		})
	}
}

// algorithmID numbers the algorithms as the multi-limit scripts' arguments
// do (args.lua).
var algorithmID = map[string]int64{"tokenbucket": 1, "gcra": 2, "fixedwindow": 3, "slidingcounter": 4, "slidinglog": 5}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// TestMultiLimitWritesTheStateText: on the server's clock, a call of
// several limits writes a token bucket's and GCRA's state as their own
// scripts do (ext/algorithm state_text.lua): "0x" and 14 hex digits, the
// key expiring within three seconds; both when the one-pass script
// decides the call (every algorithm given as steps) and when the
// two-pass one does (with a fixed window, through their step functions).
func TestMultiLimitWritesTheStateText(t *testing.T) {
	for name, newTier := range tiers() {
		if name == "memstore" || name == "miniredis" {
			continue // the Go twin keeps no text; miniredis's clock is still
		}
		t.Run(name, func(t *testing.T) {
			tier := newTier(t)
			ml, err := multilimit.New(tier.Store)
			require.NoError(t, err)
			limit := sluice.Limit{Rate: 1000, Period: time.Second, Burst: 1000}
			for _, withWindow := range []bool{false, true} {
				tenant := sluicetest.UniqueKey(t)
				checks := []multilimit.Check{
					{Key: sluice.Key(tenant, "a"), Limit: limit, Algorithm: multilimit.TokenBucket},
					{Key: sluice.Key(tenant, "b"), Limit: limit, Algorithm: multilimit.GCRA},
				}
				if withWindow {
					checks = append(checks, multilimit.Check{Key: sluice.Key(tenant, "c"), Limit: limit, Algorithm: multilimit.FixedWindow})
				}
				for range 3 {
					d, err := ml.AllowN(t.Context(), checks, 1)
					require.NoError(t, err)
					require.True(t, d.Allowed)
				}
				for _, key := range []string{checks[0].Key + ":tb", checks[1].Key + ":gcra"} {
					raw, found, err := tier.Get(t.Context(), key)
					require.NoError(t, err)
					require.True(t, found, key)
					// A space when a whole second fell between the calls: the
					// key is steady, its expiry on the 32-second grid
					// (ext/algorithm state_text.lua).
					require.Regexp(t, `^0x[0-9a-f]{14} ?$`, raw, key)
					most := 3 * time.Second
					if strings.HasSuffix(raw, " ") {
						most = 34 * time.Second
					}
					ttl, ok, err := tier.TTL(t.Context(), key)
					require.NoError(t, err)
					require.True(t, ok, "%s has an expiry", key)
					require.Greater(t, ttl, time.Duration(0), key)
					require.LessOrEqual(t, ttl, most, key)
				}
			}
		})
	}
}
