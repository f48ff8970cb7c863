package fallback_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/store/memstore"
)

// fakeStore is a wrapped limiter whose behaviour the test sets: a decision,
// an error, or a stall that ignores the context (like a client without
// context deadlines) until released.
type fakeStore struct {
	mu      sync.Mutex
	err     error
	stall   chan struct{} // non-nil: calls block until it is closed
	calls   atomic.Int64
	allowed bool
}

func (f *fakeStore) set(err error, stall chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err, f.stall = err, stall
}

func (f *fakeStore) AllowN(_ context.Context, _ string, limit sluice.Limit, _ int64) (sluice.Decision, error) {
	f.calls.Add(1)
	f.mu.Lock()
	err, stall := f.err, f.stall
	f.mu.Unlock()
	if stall != nil {
		<-stall
	}
	if err != nil {
		return sluice.Decision{}, err
	}
	return sluice.Decision{Allowed: f.allowed, Limit: limit}, nil
}

var limit = sluice.PerSecond(10)

func TestHealthyPathPassesDecisionsThrough(t *testing.T) {
	store := &fakeStore{allowed: false}
	l, err := fallback.New(store)
	require.NoError(t, err)
	for range 20 {
		d, err := l.AllowN(t.Context(), "k", limit, 1)
		require.NoError(t, err)
		require.False(t, d.Allowed, "a denial is a decision, not a failure")
		require.Equal(t, sluice.SourceStore, d.Source)
	}
	require.Equal(t, fallback.BreakerClosed, l.State(), "denials never trip the breaker")
}

func TestPolicies(t *testing.T) {
	local, err := tokenbucket.New(memstore.New())
	require.NoError(t, err)
	localPolicy, err := fallback.Local(local, fallback.Replicas(5))
	require.NoError(t, err)
	cases := []struct {
		name   string
		policy fallback.Policy
		check  func(t *testing.T, ds []sluice.Decision)
	}{
		{"open", fallback.Open(), func(t *testing.T, ds []sluice.Decision) {
			for _, d := range ds {
				require.True(t, d.Allowed)
				require.Equal(t, sluice.SourceFallbackOpen, d.Source)
			}
		}},
		{"closed", fallback.Closed(), func(t *testing.T, ds []sluice.Decision) {
			for _, d := range ds {
				require.False(t, d.Allowed)
				require.Equal(t, sluice.SourceFallbackClosed, d.Source)
				require.Equal(t, time.Minute, d.RetryAfter, "the breaker's cooldown")
			}
		}},
		{"local: limit / N", localPolicy, func(t *testing.T, ds []sluice.Decision) {
			allowed := 0
			for _, d := range ds {
				require.Equal(t, sluice.SourceFallbackLocal, d.Source)
				require.Equal(t, sluice.PerSecond(2), d.Limit, "10/s shared by 5 replicas")
				if d.Allowed {
					allowed++
				}
			}
			require.Equal(t, 2, allowed, "a burst of 10 / 5")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			store := &fakeStore{err: errors.New("dial tcp: connection refused")}
			l, err := fallback.New(store, fallback.WithPolicy(c.policy), fallback.WithBreaker(3, time.Minute, 1))
			require.NoError(t, err)
			var ds []sluice.Decision
			for range 10 {
				d, err := l.AllowN(t.Context(), "k", limit, 1)
				require.NoError(t, err)
				ds = append(ds, d)
			}
			c.check(t, ds)
			require.Equal(t, int64(3), store.calls.Load(), "the breaker opened after 3 failures: no more calls")
			require.Equal(t, fallback.BreakerOpen, l.State())
		})
	}
}

func TestTimeoutIsEnforcedWhenTheClientIgnoresTheContext(t *testing.T) {
	stall := make(chan struct{})
	defer close(stall)
	store := &fakeStore{}
	store.set(nil, stall)
	l, err := fallback.New(store, fallback.WithTimeout(20*time.Millisecond), fallback.WithPolicy(fallback.Closed()))
	require.NoError(t, err)
	start := time.Now()
	d, err := l.AllowN(t.Context(), "k", limit, 1)
	require.NoError(t, err)
	require.Equal(t, sluice.SourceFallbackClosed, d.Source)
	require.Less(t, time.Since(start), time.Second, "returned on its budget, not when the store answered")
}

func TestInFlightCallsAreBounded(t *testing.T) {
	stall := make(chan struct{})
	store := &fakeStore{}
	store.set(nil, stall)
	l, err := fallback.New(store, fallback.WithTimeout(time.Millisecond), fallback.WithMaxInFlight(8),
		fallback.WithBreaker(1_000_000, time.Minute, 1))
	require.NoError(t, err)
	before := runtime.NumGoroutine()
	for range 1000 {
		d, err := l.AllowN(t.Context(), "k", limit, 1)
		require.NoError(t, err)
		require.Equal(t, sluice.SourceFallbackOpen, d.Source)
	}
	require.Equal(t, int64(8), store.calls.Load(), "only 8 calls ever reached the stalled store")
	require.LessOrEqual(t, runtime.NumGoroutine()-before, 8)
	close(stall)
	// (Not require.Eventually: it runs its condition in a goroutine of its own.)
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), before, "the stalled calls' goroutines end when the store answers")
}

func TestErrorClassification(t *testing.T) {
	cases := []struct {
		name      string
		err       error
		surfaced  bool // returned to the caller as an error
		countsAsF bool // counts towards opening the breaker
	}{
		{"network", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), false, true},
		{"BUSY", errors.New("BUSY Redis is busy running a script"), false, true},
		{"OOM", errors.New("OOM command not allowed when used memory > 'maxmemory'"), false, true},
		{"LOADING", errors.New("LOADING Redis is loading the dataset in memory"), false, true},
		{"WRONGTYPE", errors.New("WRONGTYPE Operation against a key holding the wrong kind of value"), true, false},
		{"NOPERM", errors.New("NOPERM this user has no permissions to run the 'evalsha' command"), true, false},
		{"invalid input", sluice.ErrInvalidLimit, true, false},
		{"key conflict", sluice.ErrKeyConflict, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			store := &fakeStore{err: c.err}
			l, err := fallback.New(store, fallback.WithBreaker(2, time.Minute, 1))
			require.NoError(t, err)
			for range 3 {
				d, err := l.AllowN(t.Context(), "k", limit, 1)
				if c.surfaced {
					require.ErrorIs(t, err, c.err)
				} else {
					require.NoError(t, err)
					require.Equal(t, sluice.SourceFallbackOpen, d.Source)
				}
			}
			if c.countsAsF {
				require.Equal(t, fallback.BreakerOpen, l.State())
				require.Equal(t, int64(2), store.calls.Load())
			} else {
				require.Equal(t, fallback.BreakerClosed, l.State())
				require.Equal(t, int64(3), store.calls.Load())
			}
		})
	}
}

func TestCallerCancellationNeverTripsTheBreaker(t *testing.T) {
	stall := make(chan struct{})
	defer close(stall)
	store := &fakeStore{}
	store.set(nil, stall)
	l, err := fallback.New(store, fallback.WithTimeout(time.Second), fallback.WithBreaker(1, time.Minute, 1))
	require.NoError(t, err)
	for range 3 {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Millisecond)
		_, err := l.AllowN(ctx, "k", limit, 1)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = l.AllowN(cancelled, "k", limit, 1)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, fallback.BreakerClosed, l.State())
}

func TestBreakerRecoversThroughHalfOpenProbes(t *testing.T) {
	store := &fakeStore{allowed: true, err: errors.New("connection refused")}
	var mu sync.Mutex
	var changes []string
	l, err := fallback.New(store, fallback.WithBreaker(2, 50*time.Millisecond, 2),
		fallback.WithStateChange(func(from, to fallback.BreakerState) {
			mu.Lock()
			defer mu.Unlock()
			changes = append(changes, from.String()+"->"+to.String())
		}))
	require.NoError(t, err)
	for range 5 {
		_, err := l.AllowN(t.Context(), "k", limit, 1)
		require.NoError(t, err)
	}
	require.Equal(t, fallback.BreakerOpen, l.State())
	store.set(nil, nil) // the store is back
	require.Eventually(t, func() bool { return l.State() == fallback.BreakerHalfOpen }, time.Second, 5*time.Millisecond)
	for range 2 {
		d, err := l.AllowN(t.Context(), "k", limit, 1)
		require.NoError(t, err)
		require.Equal(t, sluice.SourceStore, d.Source)
	}
	require.Equal(t, fallback.BreakerClosed, l.State())
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"closed->open", "open->half-open", "half-open->closed"}, changes)
}

func TestBadInput(t *testing.T) {
	_, err := fallback.New(nil)
	require.Error(t, err)
	for _, c := range []struct {
		opt  fallback.Option
		want string
	}{
		{nil, "fallback: option 1 is nil"},
		{fallback.WithPolicy(nil), "fallback: WithPolicy(nil)"},
		{fallback.WithTimeout(0), "fallback: WithTimeout(0s): must be positive"},
		{fallback.WithBreaker(0, time.Second, 1), "fallback: WithBreaker(0, 1s, 1)"},
		{fallback.WithBreaker(1, 0, 1), "fallback: WithBreaker(1, 0s, 1)"},
		{fallback.WithBreaker(1, time.Second, 0), "fallback: WithBreaker(1, 1s, 0)"},
		{fallback.WithMaxInFlight(0), "fallback: WithMaxInFlight(0): must be at least 1"},
		{fallback.WithStateChange(nil), "fallback: WithStateChange(nil)"},
	} {
		_, err := fallback.New(&fakeStore{}, fallback.WithTimeout(time.Second), c.opt)
		require.ErrorContains(t, err, c.want)
	}
	_, err = fallback.Local(nil, fallback.Replicas(1))
	require.Error(t, err)
	// Invalid input is an error even while the breaker is open.
	store := &fakeStore{err: errors.New("connection refused")}
	l, err := fallback.New(store, fallback.WithBreaker(1, time.Minute, 1))
	require.NoError(t, err)
	_, _ = l.AllowN(t.Context(), "k", limit, 1)
	require.Equal(t, fallback.BreakerOpen, l.State())
	_, err = l.AllowN(t.Context(), "", limit, 1)
	require.ErrorIs(t, err, sluice.ErrInvalidKey)
	_, err = l.AllowN(t.Context(), "k", sluice.Limit{}, 1)
	require.ErrorIs(t, err, sluice.ErrInvalidLimit)
}

func TestLocalShare(t *testing.T) {
	require.Equal(t, sluice.Limit{Rate: 33, Period: time.Second, Burst: 3}, fallback.LocalShare(sluice.Limit{Rate: 100, Period: time.Second, Burst: 10}, 3))
	require.Equal(t, sluice.Limit{Rate: 1, Period: 5 * time.Second, Burst: 1}, fallback.LocalShare(sluice.PerSecond(2), 10), "a rate below N: 1 per 5 s, never above 2/s over 10")
	require.Equal(t, sluice.Limit{Rate: 1, Period: 4 * time.Second, Burst: 1}, fallback.LocalShare(sluice.PerSecond(3), 10), "rounded to a slower rate, 1 per 4 s")
	require.Equal(t, sluice.PerSecond(7), fallback.LocalShare(sluice.PerSecond(7), 0), "N below 1 counts as 1")
}
