package fallback_test

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/fallback"
)

// TestEveryDocumentedOutcomeIsClassifiedSo holds docs/failure.md's table of
// outcomes row by row: configuration mistakes are returned as errors and
// never count against the breaker; everything else the store can fail with
// is decided by the policy and counts.
func TestEveryDocumentedOutcomeIsClassifiedSo(t *testing.T) {
	surfaced := map[string]error{
		"invalid input":   sluice.ErrInvalidCost,
		"key conflict":    sluice.ErrKeyConflict,
		"WRONGTYPE":       errors.New("WRONGTYPE Operation against a key holding the wrong kind of value"),
		"NOPERM":          errors.New("NOPERM User limiter has no permissions to run the 'evalsha' command"),
		"NOAUTH":          errors.New("NOAUTH Authentication required."),
		"WRONGPASS":       errors.New("WRONGPASS invalid username-password pair or user is disabled."),
		"CROSSSLOT":       errors.New("CROSSSLOT Keys in request don't hash to the same slot"),
		"unknown command": errors.New("ERR unknown command 'evalsha', with args beginning with: "),
	}
	decided := map[string]error{
		"refused":       fmt.Errorf("dial tcp 127.0.0.1:1: %w", syscall.ECONNREFUSED),
		"reset":         fmt.Errorf("read tcp: %w", syscall.ECONNRESET),
		"dropped":       io.EOF,
		"BUSY":          errors.New("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."),
		"OOM":           errors.New("OOM command not allowed when used memory > 'maxmemory'."),
		"LOADING":       errors.New("LOADING Redis is loading the dataset in memory"),
		"READONLY":      errors.New("READONLY You can't write against a read only replica."),
		"CLUSTERDOWN":   errors.New("CLUSTERDOWN The cluster is down"),
		"NOREPLICAS":    errors.New("NOREPLICAS Not enough good replicas to write."),
		"anything else": errors.New("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."),
	}
	for name, storeErr := range surfaced {
		t.Run("returned/"+name, func(t *testing.T) {
			store := &fakeStore{err: storeErr}
			l, err := fallback.New(store, fallback.WithBreaker(2, time.Minute, 1))
			require.NoError(t, err)
			for range 3 {
				_, err := l.AllowN(t.Context(), "k", limit, 1)
				require.ErrorIs(t, err, storeErr)
			}
			require.Equal(t, fallback.BreakerClosed, l.State(), "never counted")
			require.Equal(t, int64(3), store.calls.Load())
		})
	}
	for name, storeErr := range decided {
		t.Run("policy/"+name, func(t *testing.T) {
			store := &fakeStore{err: storeErr}
			l, err := fallback.New(store, fallback.WithBreaker(2, time.Minute, 1), fallback.WithPolicy(fallback.Closed()))
			require.NoError(t, err)
			for range 3 {
				d, err := l.AllowN(t.Context(), "k", limit, 1)
				require.NoError(t, err)
				require.Equal(t, sluice.SourceFallbackClosed, d.Source)
			}
			require.Equal(t, fallback.BreakerOpen, l.State(), "each counts: 2 opened the breaker")
			require.Equal(t, int64(2), store.calls.Load())
		})
	}
}

// TestDefaults holds the defaults docs/failure.md states: a 50 ms budget,
// the Open policy, five consecutive failures to open the breaker, a 5 s
// cooldown (the Closed policy's RetryAfter), and 4096 calls in flight.
func TestDefaults(t *testing.T) {
	t.Run("budget and policy", func(t *testing.T) {
		stall := make(chan struct{})
		defer close(stall)
		store := &fakeStore{}
		store.set(nil, stall)
		l, err := fallback.New(store)
		require.NoError(t, err)
		start := time.Now()
		d, err := l.AllowN(t.Context(), "k", limit, 1)
		took := time.Since(start)
		require.NoError(t, err)
		require.Equal(t, sluice.SourceFallbackOpen, d.Source, "Open by default")
		require.GreaterOrEqual(t, took, fallback.DefaultTimeout)
		require.Less(t, took, time.Second)
		require.Equal(t, 50*time.Millisecond, fallback.DefaultTimeout)
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
		require.Equal(t, fallback.BreakerOpen, l.State())
	})
	t.Run("in flight", func(t *testing.T) {
		stall := make(chan struct{})
		store := &fakeStore{}
		store.set(nil, stall)
		l, err := fallback.New(store, fallback.WithTimeout(time.Millisecond), fallback.WithBreaker(1_000_000, time.Minute, 1))
		require.NoError(t, err)
		before := runtime.NumGoroutine()
		for range 5000 {
			_, err := l.AllowN(t.Context(), "k", limit, 1)
			require.NoError(t, err)
		}
		require.Equal(t, int64(4096), store.calls.Load(), "4096 calls reached the stalled store, no more")
		close(stall)
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// TestAFailedProbeOpensTheBreakerAgain: after the cooldown, a probe that
// fails opens the breaker for another cooldown, during which nothing is
// sent; the state-change hook sees each change once.
func TestAFailedProbeOpensTheBreakerAgain(t *testing.T) {
	store := &fakeStore{err: errors.New("connection refused")}
	var changes []string
	l, err := fallback.New(store, fallback.WithBreaker(2, 50*time.Millisecond, 1),
		fallback.WithStateChange(func(from, to fallback.BreakerState) { changes = append(changes, from.String()+"->"+to.String()) }))
	require.NoError(t, err)
	for range 2 {
		_, err := l.AllowN(t.Context(), "k", limit, 1)
		require.NoError(t, err)
	}
	require.Equal(t, fallback.BreakerOpen, l.State())
	time.Sleep(60 * time.Millisecond)
	_, err = l.AllowN(t.Context(), "k", limit, 1) // the probe, which fails
	require.NoError(t, err)
	require.Equal(t, int64(3), store.calls.Load())
	require.Equal(t, fallback.BreakerOpen, l.State())
	for range 10 {
		_, err := l.AllowN(t.Context(), "k", limit, 1)
		require.NoError(t, err)
	}
	require.Equal(t, int64(3), store.calls.Load(), "nothing sent during the second cooldown")
	require.Equal(t, []string{"closed->open", "open->half-open", "half-open->open"}, changes)
}
