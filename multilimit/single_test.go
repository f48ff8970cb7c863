package multilimit_test

import (
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
// other's consumption (one state key).
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
					for i, n := range []int64{1, 2, 0, 1, 3, 1, 0, 2} {
						got, err := ml.AllowN(t.Context(), check(key), n)
						require.NoError(t, err)
						want, err := own.AllowN(t.Context(), twin, limit, n)
						require.NoError(t, err)
						require.Equal(t, want, got.Limits[0], "call %d", i)
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
