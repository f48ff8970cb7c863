package denycache_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/denycache"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memstore"
)

// newMemStore returns memstore.New(opts...), failing t on an error.
func newMemStore(t testing.TB, opts ...memstore.Option) *memstore.Store {
	t.Helper()
	s, err := memstore.New(opts...)
	require.NoError(t, err)
	return s
}

// counting counts the calls that reach the store.
type counting struct {
	*tokenbucket.Limiter
	calls atomic.Int64
}

func (c *counting) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	c.calls.Add(1)
	return c.Limiter.AllowN(ctx, key, limit, n)
}

func setup(t *testing.T, opts ...denycache.Option) (*denycache.Limiter, *counting, *sluicetest.FakeClock) {
	clock := sluicetest.NewFakeClock(sluicetest.Epoch)
	tb, err := tokenbucket.New(newMemStore(t, memstore.WithClock(clock)), tokenbucket.WithClock(clock))
	require.NoError(t, err)
	store := &counting{Limiter: tb}
	l, err := denycache.New(store, append([]denycache.Option{denycache.WithClock(clock)}, opts...)...)
	require.NoError(t, err)
	return l, store, clock
}

var limit = sluice.Limit{Rate: 10, Period: time.Second, Burst: 10}

// TestDecisionsMatchTheStore: with and without the cache, a client's
// decisions are the same (the cache never allows what the store would
// deny, and never denies what it would allow, absent refunds elsewhere).
func TestDecisionsMatchTheStore(t *testing.T) {
	cached, _, clock := setup(t)
	plainClock := sluicetest.NewFakeClock(sluicetest.Epoch)
	plain, err := tokenbucket.New(newMemStore(t, memstore.WithClock(plainClock)), tokenbucket.WithClock(plainClock))
	require.NoError(t, err)
	for i := range 3000 {
		step := time.Duration(i%7+1) * 3 * time.Millisecond
		clock.Advance(step)
		plainClock.Advance(step)
		n := int64(1 + i%3)
		got, err := cached.AllowN(t.Context(), "k", limit, n)
		require.NoError(t, err)
		want, err := plain.AllowN(t.Context(), "k", limit, n)
		require.NoError(t, err)
		require.Equal(t, want.Allowed, got.Allowed, "call %d", i)
		if !got.Allowed {
			require.Equal(t, want.RetryAfter, got.RetryAfter, "call %d: the aged RetryAfter is the store's", i)
		}
	}
}

// TestCallsToTheStore measures what the cache saves a client sending 10 ×
// its limit: 100 requests per second against 10 per second for 10 s.
func TestCallsToTheStore(t *testing.T) {
	for _, cache := range []bool{false, true} {
		l, store, clock := setup(t)
		var limiter sluice.Limiter = l
		if !cache {
			limiter = store
		}
		allowed := 0
		for range 1000 {
			clock.Advance(10 * time.Millisecond)
			d, err := limiter.AllowN(t.Context(), "hammer", limit, 1)
			require.NoError(t, err)
			if d.Allowed {
				allowed++
			}
		}
		perDecision := float64(store.calls.Load()) / 1000
		t.Logf("cache %v: %d allowed, %.3f store calls per decision", cache, allowed, perDecision)
		if cache {
			require.LessOrEqual(t, perDecision, 0.25, "denials answered locally")
		} else {
			require.Equal(t, 1.0, perDecision)
		}
		require.InDelta(t, 110, allowed, 2, "the burst plus 10 per second, either way")
	}
}

func TestRefundAndResetForget(t *testing.T) {
	other, _, _ := setup(t) // Capabilities spends on its own key "k"
	require.Equal(t, []string{"refund", "reset", "batch", "bound", "lease", "leasebatch"},
		sluicetest.Capabilities(t, other), "every capability of the token bucket")

	l, store, _ := setup(t)
	_, err := l.AllowN(t.Context(), "k", limit, 10)
	require.NoError(t, err)
	d, err := l.AllowN(t.Context(), "k", limit, 1)
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.Equal(t, 1, l.Stats().Keys)

	r, ok := sluice.As[sluice.Refunder](l)
	require.True(t, ok)
	_, err = r.Refund(t.Context(), "k", limit, 5)
	require.NoError(t, err)
	require.Equal(t, 0, l.Stats().Keys, "a refund through the cache forgets the denial")
	d, err = l.AllowN(t.Context(), "k", limit, 1)
	require.NoError(t, err)
	require.True(t, d.Allowed)

	_, err = l.AllowN(t.Context(), "k", limit, 10)
	require.NoError(t, err)
	rs, ok := sluice.As[sluice.Resetter](l)
	require.True(t, ok)
	require.NoError(t, rs.Reset(t.Context(), "k"))
	require.Equal(t, 0, l.Stats().Keys)
	before := store.calls.Load()
	d, err = l.AllowN(t.Context(), "k", limit, 10)
	require.NoError(t, err)
	require.True(t, d.Allowed, "after a reset, a full bucket")
	require.Equal(t, before+1, store.calls.Load())
}

// TestStalenessBound: a refund made elsewhere is seen once MaxStale has
// passed, even when RetryAfter is longer.
func TestStalenessBound(t *testing.T) {
	l, store, clock := setup(t, denycache.WithMaxStale(100*time.Millisecond))
	slow := sluice.Limit{Rate: 1, Period: time.Minute, Burst: 1}
	_, err := l.AllowN(t.Context(), "k", slow, 1)
	require.NoError(t, err)
	d, err := l.AllowN(t.Context(), "k", slow, 1)
	require.NoError(t, err)
	require.False(t, d.Allowed)
	_, err = store.Refund(t.Context(), "k", slow, 1) // elsewhere: the cache does not see it
	require.NoError(t, err)
	clock.Advance(50 * time.Millisecond)
	d, err = l.AllowN(t.Context(), "k", slow, 1)
	require.NoError(t, err)
	require.False(t, d.Allowed, "stale, within the bound")
	clock.Advance(50 * time.Millisecond)
	d, err = l.AllowN(t.Context(), "k", slow, 1)
	require.NoError(t, err)
	require.True(t, d.Allowed, "seen once MaxStale has passed")
}

func TestSmallerCostsAndBoundedMemory(t *testing.T) {
	l, store, _ := setup(t, denycache.WithCapacity(3))
	_, err := l.AllowN(t.Context(), "k", limit, 8)
	require.NoError(t, err)
	d, err := l.AllowN(t.Context(), "k", limit, 5) // denied: 2 left
	require.NoError(t, err)
	require.False(t, d.Allowed)
	before := store.calls.Load()
	d, err = l.AllowN(t.Context(), "k", limit, 2) // another cost: asks the store
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.Equal(t, before+1, store.calls.Load())

	for _, k := range []string{"a", "b", "c", "d", "e"} {
		_, err := l.AllowN(t.Context(), k, limit, 10)
		require.NoError(t, err)
		_, err = l.AllowN(t.Context(), k, limit, 1)
		require.NoError(t, err)
	}
	require.Equal(t, 3, l.Stats().Keys, "at most the capacity")
}

func TestBadInput(t *testing.T) {
	_, err := denycache.New(nil)
	require.Error(t, err)
	tb, err := tokenbucket.New(newMemStore(t))
	require.NoError(t, err)
	for _, c := range []struct {
		opt  denycache.Option
		want string
	}{
		{nil, "denycache: option 1 is nil"},
		{denycache.WithCapacity(0), "denycache: WithCapacity(0): must be at least 1"},
		{denycache.WithMaxStale(-time.Second), "denycache: WithMaxStale(-1s): must be positive"},
		{denycache.WithClock(nil), "denycache: WithClock(nil)"},
	} {
		_, err := denycache.New(tb, denycache.WithCapacity(5), c.opt)
		require.ErrorContains(t, err, c.want)
	}
	l, err := denycache.New(tb)
	require.NoError(t, err)
	_, err = l.AllowN(t.Context(), "", limit, 1)
	require.ErrorIs(t, err, sluice.ErrInvalidKey, "input errors come from the store, unchanged")
}
