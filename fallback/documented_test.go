package fallback_test

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestEveryDocumentedOutcomeIsClassifiedSo holds docs/failure.md's table of
// outcomes row by row: configuration mistakes are returned as errors and
// never count against the breaker; everything else the store can fail with
// is decided by the policy and counts. Error replies are built as the
// stores return them, *ext.ServerError: the classification reads their
// code, never their text.
func TestEveryDocumentedOutcomeIsClassifiedSo(t *testing.T) {
	surfaced := map[string]error{
		"invalid input": sluice.ErrInvalidCost,
		"key conflict":  sluice.ErrKeyConflict,
		"WRONGTYPE":     ext.NewServerError("WRONGTYPE Operation against a key holding the wrong kind of value"),
		"NOPERM":        ext.NewServerError("NOPERM User limiter has no permissions to run the 'evalsha' command"),
		"NOAUTH":        ext.NewServerError("NOAUTH Authentication required."),
		"WRONGPASS":     ext.NewServerError("WRONGPASS invalid username-password pair or user is disabled."),
		"CROSSSLOT":     ext.NewServerError("CROSSSLOT Keys in request don't hash to the same slot"),
	}
	decided := map[string]error{
		"refused":     fmt.Errorf("dial tcp 127.0.0.1:1: %w", syscall.ECONNREFUSED),
		"reset":       fmt.Errorf("read tcp: %w", syscall.ECONNRESET),
		"dropped":     io.EOF,
		"BUSY":        ext.NewServerError("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."),
		"OOM":         ext.NewServerError("OOM command not allowed when used memory > 'maxmemory'."),
		"LOADING":     ext.NewServerError("LOADING Redis is loading the dataset in memory"),
		"READONLY":    ext.NewServerError("READONLY You can't write against a read only replica."),
		"CLUSTERDOWN": ext.NewServerError("CLUSTERDOWN The cluster is down"),
		"NOREPLICAS":  ext.NewServerError("NOREPLICAS Not enough good replicas to write."),
		// Redis's generic ERR gives no finer code, and some of its causes
		// pass (too many clients): an unknown command is a failure.
		"unknown command": ext.NewServerError("ERR unknown command 'evalsha', with args beginning with: "),
		"other ERR":       ext.NewServerError("ERR max number of clients reached"),
		"anything else":   ext.NewServerError("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."),
	}
	for name, storeErr := range surfaced {
		t.Run("returned/"+name, func(t *testing.T) {
			store := &fakeStore{err: storeErr}
			l, err := fallback.New(store, fallback.WithBreaker(fallback.Breaker{Failures: 2, Cooldown: time.Minute, Probes: 1}))
			require.NoError(t, err)
			for range 3 {
				_, err := l.AllowN(t.Context(), "k", limit, 1)
				require.ErrorIs(t, err, storeErr)
			}
			require.Equal(t, fallback.BreakerClosed, l.Stats().Breaker, "never counted")
			require.Equal(t, int64(3), store.calls.Load())
		})
	}
	for name, storeErr := range decided {
		t.Run("policy/"+name, func(t *testing.T) {
			store := &fakeStore{err: storeErr}
			l, err := fallback.New(store, fallback.WithBreaker(fallback.Breaker{Failures: 2, Cooldown: time.Minute, Probes: 1}), fallback.WithPolicy(fallback.Closed()))
			require.NoError(t, err)
			for range 3 {
				d, err := l.AllowN(t.Context(), "k", limit, 1)
				require.NoError(t, err)
				require.Equal(t, sluice.SourceFallbackClosed, d.Source)
			}
			require.Equal(t, fallback.BreakerOpen, l.Stats().Breaker, "each counts: 2 opened the breaker")
			require.Equal(t, int64(2), store.calls.Load())
		})
	}
}

// TestDefaults holds the defaults docs/failure.md states: a 50 ms budget,
// the Open policy, five consecutive failures to open the breaker, a 5 s
// cooldown (the Closed policy's RetryAfter), and 4096 calls in flight.
func TestDefaults(t *testing.T) {
	t.Run("budget and policy", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			stall := make(chan struct{})
			defer close(stall)
			store := &fakeStore{}
			store.set(nil, stall)
			l, err := fallback.New(store)
			require.NoError(t, err)
			start := time.Now()
			d, err := l.AllowN(t.Context(), "k", limit, 1)
			require.NoError(t, err)
			require.Equal(t, sluice.SourceFallbackOpen, d.Source, "Open by default")
			require.Equal(t, fallback.DefaultTimeout, time.Since(start), "the budget")
			require.Equal(t, 50*time.Millisecond, fallback.DefaultTimeout)
		})
	})
	t.Run("breaker", func(t *testing.T) {
		store := &fakeStore{err: errors.New("connection refused")}
		l, err := fallback.New(store, fallback.WithPolicy(fallback.Closed()))
		require.NoError(t, err)
		for i := range 10 {
			d, err := l.AllowN(t.Context(), "k", limit, 1)
			require.NoError(t, err)
			if i >= 5 {
				require.Equal(t, 5*time.Second, d.RetryAfter, "the cooldown")
			}
		}
		require.Equal(t, int64(5), store.calls.Load(), "five failures opened the breaker")
		require.Equal(t, fallback.BreakerOpen, l.Stats().Breaker)
	})
	t.Run("in flight", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			stall := make(chan struct{})
			store := &fakeStore{}
			store.set(nil, stall)
			l, err := fallback.New(store, fallback.WithTimeout(time.Minute))
			require.NoError(t, err)
			var wg sync.WaitGroup
			var byPolicy atomic.Int64
			for range 5000 {
				wg.Go(func() {
					d, err := l.AllowN(t.Context(), "k", limit, 1)
					require.NoError(t, err)
					if d.Source != sluice.SourceStore {
						byPolicy.Add(1)
					}
				})
			}
			synctest.Wait()
			require.Equal(t, int64(4096), store.calls.Load(), "4096 calls reached the stalled store, no more")
			require.Equal(t, int64(5000-4096), byPolicy.Load(), "the rest were decided by the policy")
			close(stall)
			wg.Wait()
			require.Equal(t, int64(4096), store.calls.Load())
			require.Equal(t, fallback.DefaultMaxInFlight, 4096)
		})
	})
}

// TestAFailedProbeOpensTheBreakerAgain: after the cooldown, a probe that
// fails opens the breaker for another cooldown, during which nothing is
// sent; the state-change hook sees each change once.
func TestAFailedProbeOpensTheBreakerAgain(t *testing.T) {
	store := &fakeStore{err: errors.New("connection refused")}
	var changes []string
	clock := sluicetest.NewFakeClock(sluicetest.Epoch)
	l, err := fallback.New(store, fallback.WithBreaker(fallback.Breaker{Failures: 2, Cooldown: 50 * time.Millisecond, Probes: 1}), fallback.WithClock(clock),
		fallback.WithStateChange(func(from, to fallback.BreakerState) { changes = append(changes, from.String()+"->"+to.String()) }))
	require.NoError(t, err)
	for range 2 {
		_, err := l.AllowN(t.Context(), "k", limit, 1)
		require.NoError(t, err)
	}
	require.Equal(t, fallback.BreakerOpen, l.Stats().Breaker)
	clock.Advance(49 * time.Millisecond)
	require.Equal(t, fallback.BreakerOpen, l.Stats().Breaker, "within the cooldown")
	clock.Advance(time.Millisecond)
	require.Equal(t, fallback.BreakerHalfOpen, l.Stats().Breaker, "the cooldown has passed")
	_, err = l.AllowN(t.Context(), "k", limit, 1) // the probe, which fails
	require.NoError(t, err)
	require.Equal(t, int64(3), store.calls.Load())
	require.Equal(t, fallback.BreakerOpen, l.Stats().Breaker)
	for range 10 {
		_, err := l.AllowN(t.Context(), "k", limit, 1)
		require.NoError(t, err)
	}
	require.Equal(t, int64(3), store.calls.Load(), "nothing sent during the second cooldown")
	require.Equal(t, []string{"closed->open", "open->half-open", "half-open->open"}, changes)
}
