package fallback_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/redistest"
)

// TestExpiredDeadlinesDoNotChangeTheNextCall: right after a storm of
// calls whose callers' deadlines expire in flight (50 µs), a call with no
// deadline on a healthy Redis is decided by Redis, never by the policy:
// the storm is the callers' error, not the store's, so it neither trips
// the breaker nor holds the in-flight slots. Through both clients, 20
// storms each. The store's budget is long (10 s), so that a loaded
// machine's slow call is not taken for a storm's effect: a breaker that
// the storm tripped, or slots it still held, would have the policy decide
// at once whatever the budget.
func TestExpiredDeadlinesDoNotChangeTheNextCall(t *testing.T) {
	server := redistest.SharedRedis(t)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			l := chaosLimiter(t, b.newStore(t, server.Addr()), fallback.Closed(), fallback.WithMaxInFlight(64),
				fallback.WithTimeout(10*time.Second))
			key := sluice.Key(sluicetest.UniqueKey(t))
			limit := sluice.PerSecond(1_000_000).WithBurst(1_000_000)
			for storm := range 20 {
				var wg sync.WaitGroup
				for range 100 {
					wg.Go(func() {
						ctx, cancel := context.WithTimeout(t.Context(), 50*time.Microsecond)
						defer cancel()
						// Decided, by Redis or (beyond the in-flight bound) by
						// the policy, or the caller's own deadline.
						if _, err := l.AllowN(ctx, key, limit, 1); err != nil {
							require.ErrorIs(t, err, context.DeadlineExceeded, "storm %d", storm)
						}
					})
				}
				wg.Wait()
				d, err := l.AllowN(t.Context(), key, limit, 1)
				require.NoError(t, err, "storm %d", storm)
				require.Equal(t, sluice.SourceStore, d.Source, "storm %d: the next call is Redis's (%+v)", storm, l.Stats())
				require.Equal(t, fallback.BreakerClosed, l.Stats().Breaker, "storm %d", storm)
			}
		})
	}
}
