package fallback_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/redistest"
)

// TestCallersDeadlinesDoNotOpenTheBreaker: on a healthy Redis, callers
// with deadlines of 50 to 200 µs get their own context.DeadlineExceeded,
// never the policy's answer, and the breaker stays closed, so a caller
// with no deadline is decided by the store (issue 15, item 1: the clients
// return "i/o timeout" before the context says it is done).
func TestCallersDeadlinesDoNotOpenTheBreaker(t *testing.T) {
	server := redistest.SharedRedis(t)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			tb, err := tokenbucket.New(b.newStore(t, server.Addr()))
			require.NoError(t, err)
			// A budget far above the callers' deadlines, so that on a loaded
			// machine the last call (with no deadline) is not cut by it.
			l, err := fallback.New(tb, fallback.WithPolicy(fallback.Closed()), fallback.WithBreaker(fallback.Breaker{Failures: 5, Cooldown: time.Minute, Probes: 1}),
				fallback.WithTimeout(time.Second))
			require.NoError(t, err)
			key := sluice.Key(sluicetest.UniqueKey(t))
			limit := sluice.PerSecond(1_000_000).WithBurst(1_000_000)
			var policy, deadline, stored, other atomic.Int64
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					for i := range 300 {
						timeout := time.Duration(50+(g*37+i*11)%150) * time.Microsecond
						ctx, cancel := context.WithTimeout(context.Background(), timeout)
						d, err := l.AllowN(ctx, key, limit, 1)
						cancel()
						switch {
						case errors.Is(err, context.DeadlineExceeded):
							deadline.Add(1)
						case err != nil:
							other.Add(1)
							t.Errorf("an error that is not the caller's deadline: %v", err)
						case d.Source != sluice.SourceStore:
							policy.Add(1)
						default:
							stored.Add(1)
						}
					}
				})
			}
			wg.Wait()
			t.Logf("%d deadline exceeded, %d decided by the store, %d by the policy, %d other errors", deadline.Load(), stored.Load(), policy.Load(), other.Load())
			require.Zero(t, policy.Load(), "no call with a deadline of its own is the policy's")
			require.Equal(t, fallback.BreakerClosed, l.Stats().Breaker)
			// Known, not yet fixed (rueidis): right after many expired
			// deadlines, one call with no deadline of its own can fail
			// with context.DeadlineExceeded (2 of 16 runs). A call to the
			// store alone takes that first, so that the check below is
			// about the breaker.
			_, direct := tb.AllowN(t.Context(), key, limit, 1)
			t.Logf("the store's first call with no deadline: %v", direct)
			d, err := l.AllowN(t.Context(), key, limit, 1)
			require.NoError(t, err)
			require.Equal(t, sluice.SourceStore, d.Source, "a caller without a deadline is decided by the store")
		})
	}
}
