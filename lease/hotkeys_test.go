package lease_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/sluicetest"
)

// TestOnlyHotKeysAreLeased: with WithHotKeys, a key of the hot tenant is
// leased (its decisions come from the process's lease, estimated), and
// every other key is decided by the wrapped limiter on each request,
// exactly as without the decorator: nothing is reserved for it.
func TestOnlyHotKeysAreLeased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { // time stands still: decisions compare exactly
		store := &sluicetest.CountingStore{Store: newMemStore(t)}
		tb, err := tokenbucket.New(store)
		require.NoError(t, err)
		l, err := lease.New(tb, lease.WithHotKeys("tenant:42"), lease.WithSize(10))
		require.NoError(t, err)
		defer func() { require.NoError(t, l.Close()) }()
		limit := sluice.Limit{Rate: 100, Period: time.Hour, Burst: 100}

		hot, cold := sluice.Key("tenant:42", "api"), sluice.Key("tenant:43", "api")
		for range 5 {
			d, err := l.AllowN(t.Context(), hot, limit, 1)
			require.NoError(t, err)
			require.True(t, d.Allowed)
			require.True(t, d.Estimated, "the hot key's decisions are the lease's")
		}
		require.Positive(t, l.Held(hot), "the hot key holds a lease")
		synctest.Wait() // the hot key's background refill has landed
		runs := store.Runs.Load()

		bare, err := tokenbucket.New(newMemStore(t))
		require.NoError(t, err)
		for range 5 {
			d, err := l.AllowN(t.Context(), cold, limit, 1)
			require.NoError(t, err)
			want, err := bare.AllowN(t.Context(), cold, limit, 1)
			require.NoError(t, err)
			require.Equal(t, want, d, "a cold key decides as the bare bucket")
		}
		require.Zero(t, l.Held(cold), "nothing leased for a cold key")
		require.Equal(t, runs+5, store.Runs.Load(), "one script call per cold request")
	})
}

func TestHotKeyOptionsRefuseWhatCannotWork(t *testing.T) {
	tb, err := tokenbucket.New(newMemStore(t))
	require.NoError(t, err)
	for _, opt := range []lease.Option{lease.WithHotKeys(), lease.WithHotKeys("a", ""), lease.WithPredicate(nil)} {
		_, err := lease.New(tb, opt)
		require.Error(t, err)
		require.ErrorContains(t, err, "lease: ")
	}
	l, err := lease.New(tb, lease.WithPredicate(func(key string) bool { return key == "only" }))
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close()) }()
	_, err = l.AllowN(t.Context(), "other", sluice.PerMinute(10), 1)
	require.NoError(t, err)
	require.Zero(t, l.Held("other"))
	_, err = l.AllowN(t.Context(), "only", sluice.PerMinute(10), 1)
	require.NoError(t, err)
	require.Positive(t, l.Held("only"))
}
