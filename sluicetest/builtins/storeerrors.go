package builtins

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/redistest"
)

// RunStoreErrors checks, for a Redis store on server, what every store must
// report as an error and never as a decision: a key holding another type
// or foreign data, a cancelled context, a reply of the wrong shape. It also
// checks that a single node takes the keys of one call in different slots
// (only a Cluster refuses them). Store-specific cases (a nil or unreachable
// client) stay with each store's tests.
func RunStoreErrors(t *testing.T, server *redistest.RedisServer, store sluice.Store) {
	l, err := tokenbucket.New(store)
	require.NoError(t, err)
	key := sluicetest.UniqueKey(t)

	t.Run("a key holding another type is an error, not a decision", func(t *testing.T) {
		_, err := server.Do("HSET", key+":hash"+tokenbucket.KeySuffix, "f", "v")
		require.NoError(t, err)
		_, err = l.AllowN(t.Context(), key+":hash", sluice.PerSecond(1), 1)
		require.ErrorIs(t, err, sluice.ErrKeyConflict)
		require.ErrorContains(t, err, "WRONGTYPE")
	})
	t.Run("a key holding foreign data", func(t *testing.T) {
		_, err := server.Do("SET", key+":junk"+tokenbucket.KeySuffix, "not a number")
		require.NoError(t, err)
		_, err = l.AllowN(t.Context(), key+":junk", sluice.PerSecond(1), 1)
		require.ErrorIs(t, err, sluice.ErrKeyConflict)
	})
	t.Run("a cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := l.AllowN(ctx, key, sluice.PerSecond(1), 1)
		require.ErrorIs(t, err, context.Canceled)
	})
	t.Run("a reply of the wrong shape", func(t *testing.T) {
		_, err := store.Run(t.Context(), sluice.NewScript("return 'hello'", nil), []string{key}, nil)
		require.ErrorIs(t, err, sluice.ErrUnexpectedReply)
		_, err = store.Run(t.Context(), sluice.NewScript("return {1, 'x'}", nil), []string{key}, nil)
		require.ErrorIs(t, err, sluice.ErrUnexpectedReply)
	})
	t.Run("a single node takes keys of different slots", func(t *testing.T) {
		got, err := store.Run(t.Context(), sluice.NewScript("return {#KEYS}", nil), []string{sluice.Key("a"), sluice.Key("b")}, nil)
		require.NoError(t, err)
		require.Equal(t, []int64{2}, got)
	})
}
