package fallback_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/store/memstore"
)

// newMemStore returns memstore.New(opts...), failing t on an error.
func newMemStore(t testing.TB, opts ...memstore.Option) *memstore.Store {
	t.Helper()
	s, err := memstore.New(opts...)
	require.NoError(t, err)
	return s
}

// fakeStore is a wrapped limiter whose behaviour the test sets: a decision,
// an error, or a stall until released, which honours the context unless
// ignoresContext (like go-redis without ContextTimeoutEnabled).
type fakeStore struct {
	mu             sync.Mutex
	err            error
	stall          chan struct{} // non-nil: calls block until it is closed
	calls          atomic.Int64
	allowed        bool
	ignoresContext bool
}

func (f *fakeStore) set(err error, stall chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err, f.stall = err, stall
}

func (f *fakeStore) AllowN(ctx context.Context, _ string, limit sluice.Limit, _ int64) (sluice.Decision, error) {
	f.calls.Add(1)
	f.mu.Lock()
	err, stall := f.err, f.stall
	f.mu.Unlock()
	switch {
	case stall != nil && f.ignoresContext:
		<-stall
	case stall != nil:
		select {
		case <-stall:
		case <-ctx.Done():
			return sluice.Decision{}, ctx.Err()
		}
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
	require.Equal(t, fallback.BreakerClosed, l.Stats().Breaker, "denials never trip the breaker")
}

func TestPolicies(t *testing.T) {
	local, err := tokenbucket.New(newMemStore(t))
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
			l, err := fallback.New(store, fallback.WithPolicy(c.policy), fallback.WithBreaker(fallback.Breaker{Failures: 3, Cooldown: time.Minute, Probes: 1}))
			require.NoError(t, err)
			var ds []sluice.Decision
			for range 10 {
				d, err := l.AllowN(t.Context(), "k", limit, 1)
				require.NoError(t, err)
				ds = append(ds, d)
			}
			c.check(t, ds)
			require.Equal(t, int64(3), store.calls.Load(), "the breaker opened after 3 failures: no more calls")
			require.Equal(t, fallback.BreakerOpen, l.Stats().Breaker)
		})
	}
}

// TestTimeoutIsEnforcedThroughTheContext: by default a call runs on the
// caller's goroutine under the budget's context, and a client that honours
// it returns at the budget exactly: the policy decides then.
func TestTimeoutIsEnforcedThroughTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stall := make(chan struct{})
		defer close(stall)
		store := &fakeStore{}
		store.set(nil, stall)
		l, err := fallback.New(store, fallback.WithTimeout(20*time.Millisecond), fallback.WithPolicy(fallback.Closed()))
		require.NoError(t, err)
		start := time.Now()
		goroutines := runtime.NumGoroutine()
		d, err := l.AllowN(t.Context(), "k", limit, 1)
		require.NoError(t, err)
		require.Equal(t, sluice.SourceFallbackClosed, d.Source)
		require.Equal(t, 20*time.Millisecond, time.Since(start), "returned at its budget")
		require.Equal(t, goroutines, runtime.NumGoroutine(), "no goroutine outlives the call")
	})
}

// TestTimeoutIsEnforcedWhenTheClientIgnoresTheContext: WithDetachedCalls
// keeps the budget with a client that ignores the context: the caller
// returns at the budget while the call finishes in the background.
func TestTimeoutIsEnforcedWhenTheClientIgnoresTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stall := make(chan struct{})
		store := &fakeStore{ignoresContext: true}
		store.set(nil, stall)
		l, err := fallback.New(store, fallback.WithTimeout(20*time.Millisecond), fallback.WithPolicy(fallback.Closed()),
			fallback.WithDetachedCalls())
		require.NoError(t, err)
		start := time.Now()
		d, err := l.AllowN(t.Context(), "k", limit, 1)
		require.NoError(t, err)
		require.Equal(t, sluice.SourceFallbackClosed, d.Source)
		require.Equal(t, 20*time.Millisecond, time.Since(start), "returned on its budget, not when the store answered")
		close(stall)
		synctest.Wait() // the detached call ends when the store answers
	})
}

// TestInFlightCallsAreBounded: with the store stalled, at most
// WithMaxInFlight calls reach it at once; the others are decided by the
// policy at once, without waiting, and are no failure of the store.
func TestInFlightCallsAreBounded(t *testing.T) {
	for _, detached := range []bool{false, true} {
		t.Run(fmt.Sprintf("detached=%v", detached), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				stall := make(chan struct{})
				store := &fakeStore{ignoresContext: detached}
				store.set(nil, stall)
				opts := []fallback.Option{fallback.WithTimeout(time.Minute), fallback.WithMaxInFlight(8), fallback.WithBreaker(fallback.Breaker{Failures: 1, Cooldown: time.Hour, Probes: 1})}
				if detached {
					opts = append(opts, fallback.WithDetachedCalls())
				}
				l, err := fallback.New(store, opts...)
				require.NoError(t, err)
				var wg sync.WaitGroup
				var atOnce atomic.Int64
				for range 100 {
					wg.Go(func() {
						d, err := l.AllowN(t.Context(), "k", limit, 1)
						require.NoError(t, err)
						if d.Source == sluice.SourceFallbackOpen {
							atOnce.Add(1)
						}
					})
				}
				synctest.Wait()
				require.Equal(t, int64(8), store.calls.Load(), "only 8 calls reached the stalled store")
				require.Equal(t, int64(92), atOnce.Load(), "the others were decided by the policy at once")
				require.Equal(t, fallback.BreakerClosed, l.Stats().Breaker, "the calls turned away are no failure of the store")
				close(stall)
				wg.Wait()
				synctest.Wait()
				require.Equal(t, int64(8), store.calls.Load())
			})
		})
	}
}

func TestErrorClassification(t *testing.T) {
	cases := []struct {
		name      string
		err       error
		surfaced  bool // returned to the caller as an error
		countsAsF bool // counts towards opening the breaker
	}{
		{"network", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), false, true},
		{"BUSY", ext.NewServerError("BUSY Redis is busy running a script"), false, true},
		{"OOM", ext.NewServerError("OOM command not allowed when used memory > 'maxmemory'"), false, true},
		{"LOADING", ext.NewServerError("LOADING Redis is loading the dataset in memory"), false, true},
		{"unknown command", ext.NewServerError("ERR unknown command 'evalsha', with args beginning with: "), false, true},
		{"script error", ext.NewServerError("ERR user_script:1: Script attempted to access nonexistent global variable 'x'"), false, true},
		{"WRONGTYPE", ext.NewServerError("WRONGTYPE Operation against a key holding the wrong kind of value"), true, false},
		{"NOPERM", ext.NewServerError("NOPERM this user has no permissions to run the 'evalsha' command"), true, false},
		{"NOPERM through the algorithm", fmt.Errorf("tokenbucket: %w", ext.NewServerError("NOPERM this user has no permissions to run the 'evalsha' command")), true, false},
		{"SLUICE_INVALID_STATE", ext.NewServerError(ext.CodeInvalidState + " the state is not a bucket"), true, false},
		{"invalid input", sluice.ErrInvalidLimit, true, false},
		{"key conflict", sluice.ErrKeyConflict, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			store := &fakeStore{err: c.err}
			l, err := fallback.New(store, fallback.WithBreaker(fallback.Breaker{Failures: 2, Cooldown: time.Minute, Probes: 1}))
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
				require.Equal(t, fallback.BreakerOpen, l.Stats().Breaker)
				require.Equal(t, int64(2), store.calls.Load())
			} else {
				require.Equal(t, fallback.BreakerClosed, l.Stats().Breaker)
				require.Equal(t, int64(3), store.calls.Load())
			}
		})
	}
}

// TestIsConfigError: IsConfigError reads the sentinel errors and the code
// of the *ext.ServerError in an error's chain, never the error's text; a
// generic ERR reply is a failure.
func TestIsConfigError(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"network", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), false},
		{"timeout", fallback.ErrTimeout, false},
		{"invalid limit", sluice.ErrInvalidLimit, true},
		{"invalid cost", fmt.Errorf("tokenbucket: %w", sluice.ErrInvalidCost), true},
		{"limit error", &sluice.LimitError{Limit: limit, Reason: "interval not whole microseconds"}, true},
		{"cost exceeds burst", &sluice.CostError{Cost: 21, Limit: limit, Reason: "above the burst", Exceeds: true}, true},
		{"invalid key", sluice.ErrInvalidKey, true},
		{"key conflict", sluice.ErrKeyConflict, true},
		{"unexpected reply", sluice.ErrUnexpectedReply, true},
		{"cross slot", sluice.ErrCrossSlot, true},
		{"NOPERM", ext.NewServerError("NOPERM this user has no permissions to run the 'evalsha' command"), true},
		{"NOAUTH", ext.NewServerError("NOAUTH Authentication required."), true},
		{"WRONGPASS", ext.NewServerError("WRONGPASS invalid username-password pair or user is disabled."), true},
		{"WRONGTYPE", ext.NewServerError("WRONGTYPE Operation against a key holding the wrong kind of value"), true},
		{"CROSSSLOT", ext.NewServerError("CROSSSLOT Keys in request don't hash to the same slot"), true},
		{"wrapped NOPERM", fmt.Errorf("gcra: %w", ext.NewServerError("NOPERM no permissions")), true},
		{"SLUICE_INVALID_LIMIT", ext.NewServerError(ext.CodeInvalidLimit + " rate must be positive"), true},
		{"SLUICE_COST_EXCEEDS_BURST", ext.NewServerError(ext.CodeCostExceedsBurst + " cost 21 exceeds burst 20"), true},
		{"unknown command", ext.NewServerError("ERR unknown command 'evalsha', with args beginning with: "), false},
		{"script error", ext.NewServerError("ERR Error running script (call to f_0123): @user_script:1: oops"), false},
		{"BUSY", ext.NewServerError("BUSY Redis is busy running a script"), false},
		{"OOM", ext.NewServerError("OOM command not allowed when used memory > 'maxmemory'"), false},
		{"READONLY", ext.NewServerError("READONLY You can't write against a read only replica."), false},
		// Text alone is no server error: only a store's *ext.ServerError
		// carries a code.
		{"NOPERM as text only", errors.New("NOPERM this user has no permissions to run the 'evalsha' command"), false},
		{"WRONGTYPE as text only", errors.New("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, fallback.IsConfigError(c.err))
		})
	}
}

func TestCallerCancellationNeverTripsTheBreaker(t *testing.T) {
	stall := make(chan struct{})
	defer close(stall)
	store := &fakeStore{}
	store.set(nil, stall)
	l, err := fallback.New(store, fallback.WithTimeout(time.Second), fallback.WithBreaker(fallback.Breaker{Failures: 1, Cooldown: time.Minute, Probes: 1}))
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
	require.Equal(t, fallback.BreakerClosed, l.Stats().Breaker)
}

func TestBreakerRecoversThroughHalfOpenProbes(t *testing.T) {
	store := &fakeStore{allowed: true, err: errors.New("connection refused")}
	var mu sync.Mutex
	var changes []string
	l, err := fallback.New(store, fallback.WithBreaker(fallback.Breaker{Failures: 2, Cooldown: 50 * time.Millisecond, Probes: 2}),
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
	require.Equal(t, fallback.BreakerOpen, l.Stats().Breaker)
	store.set(nil, nil) // the store is back
	require.Eventually(t, func() bool { return l.Stats().Breaker == fallback.BreakerHalfOpen }, time.Second, 5*time.Millisecond)
	for range 2 {
		d, err := l.AllowN(t.Context(), "k", limit, 1)
		require.NoError(t, err)
		require.Equal(t, sluice.SourceStore, d.Source)
	}
	require.Equal(t, fallback.BreakerClosed, l.Stats().Breaker)
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
		{fallback.WithBreaker(fallback.Breaker{Failures: -1}), "fallback: WithBreaker({Failures:-1 Cooldown:0s Probes:0}): no field may be negative"},
		{fallback.WithBreaker(fallback.Breaker{Cooldown: -time.Second}), "no field may be negative"},
		{fallback.WithBreaker(fallback.Breaker{Probes: -1}), "no field may be negative"},
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
	l, err := fallback.New(store, fallback.WithBreaker(fallback.Breaker{Failures: 1, Cooldown: time.Minute, Probes: 1}))
	require.NoError(t, err)
	_, _ = l.AllowN(t.Context(), "k", limit, 1)
	require.Equal(t, fallback.BreakerOpen, l.Stats().Breaker)
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
