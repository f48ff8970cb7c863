package replay

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms"
	"github.com/sluicehq/sluice/algorithms/fixedwindow"
	"github.com/sluicehq/sluice/algorithms/gcra"
	"github.com/sluicehq/sluice/algorithms/slidingcounter"
	"github.com/sluicehq/sluice/algorithms/slidinglog"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/embedded"
)

// clockLimiter is the algorithm called name on store, sending clock's
// time as the script's now argument, as a Limiter built with WithClock
// does.
func clockLimiter(t *testing.T, name string, store sluice.Store, clock sluice.Clock) sluice.Limiter {
	t.Helper()
	var l sluice.Limiter
	var err error
	switch name {
	case "tokenbucket":
		l, err = tokenbucket.New(store, tokenbucket.WithClock(clock))
	case "gcra":
		l, err = gcra.New(store, gcra.WithClock(clock))
	case "fixedwindow":
		l, err = fixedwindow.New(store, fixedwindow.WithClock(clock))
	case "slidingcounter":
		l, err = slidingcounter.New(store, slidingcounter.WithClock(clock))
	case "slidinglog":
		l, err = slidinglog.New(store, slidinglog.WithClock(clock))
	default:
		t.Fatalf("no limiter for %q", name)
	}
	require.NoError(t, err)
	return l
}

// TestReplayMatchesTheRealStores replays generated logs and decides the
// same records one by one through each algorithm's real Limiter, its Lua
// script run by the embedded store (miniredis) and by a real redis-server,
// with a fake clock set to each record's time (the script's now argument):
// every record gets the same decision. A cost the limit can never allow,
// which the Limiter refuses with ErrCostExceedsBurst before any script
// runs, is a denial in the replay. Each log spans minutes of simulated time
// and is decided in about a second of wall time, a few milliseconds
// between two requests of one key: the stores' keys, which expire on the
// wall clock, are still there whenever the simulated time says the scripts
// would read them.
func TestReplayMatchesTheRealStores(t *testing.T) {
	cases := []modelCase{modelCases[1], modelCases[2], modelCases[5]}
	stores := []struct {
		name  string
		start func(t *testing.T) sluice.Store
	}{
		{"embedded", func(t *testing.T) sluice.Store {
			s, err := embedded.Start()
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
		{"redis-server", func(t *testing.T) sluice.Store {
			// Skips when redis-server is missing, fails instead with
			// SLUICE_REQUIRE_REDIS=1.
			return redistest.GoRedisTier(t, redistest.StartRedis(t)).Store
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			store := st.start(t)
			for i, c := range cases {
				recs := genLog(uint64(100+i), 1000, c.limit)
				got := replayAll(t, recs, Policy{Name: "p", Limit: c.limit, Cost: c.cost})
				for _, name := range algorithms.Names {
					t.Run(fmt.Sprintf("%s/%s", c.limit, name), func(t *testing.T) {
						clock := sluicetest.NewFakeClock(t0)
						limiter := clockLimiter(t, name, store, clock)
						// Keys of their own per case: the store is shared.
						prefix := fmt.Sprintf("case%d:", i)
						var allowed, denied int
						requireSameDecisions(t, recs, c.cost, got[name], st.name, func(j int, cost int64) bool {
							clock.Set(recs[j].Time)
							d, err := limiter.AllowN(context.Background(), prefix+recs[j].Key, c.limit, cost)
							if errors.Is(err, sluice.ErrCostExceedsBurst) {
								return false
							}
							require.NoError(t, err, "line %d", recs[j].Line)
							if d.Allowed {
								allowed++
							} else {
								denied++
							}
							return d.Allowed
						})
						require.Positive(t, allowed)
						require.Positive(t, denied)
					})
				}
			}
		})
	}
}
