package tokenbucket_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/goredisstore"
)

// TestBatchKeyConflict: in a batch on real Redis, a key holding another
// type fails its own request only (ErrKeyConflict, nothing written for
// it); the others are decided, on both of the batch's paths: requests
// sharing keys, and a key each under one limit among keys that do not
// exist yet (MGET answers nil for both kinds).
func TestBatchKeyConflict(t *testing.T) {
	server := redistest.SharedRedis(t)
	client := redis.NewClient(&redis.Options{Addr: server.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	store, err := goredisstore.New(client)
	require.NoError(t, err)
	l, err := tokenbucket.New(store)
	require.NoError(t, err)
	tag := sluicetest.UniqueKey(t)
	bad, good := sluice.Key(tag, "bad"), sluice.Key(tag, "good")
	require.NoError(t, client.HSet(t.Context(), bad+tokenbucket.KeySuffix, "f", "v").Err())
	limit := sluice.PerSecond(5)
	results, err := l.AllowBatch(t.Context(), []sluice.Request{{Key: good, Limit: limit, N: 2}, {Key: bad, Limit: limit, N: 1}, {Key: good, Limit: limit, N: 1}})
	require.NoError(t, err)
	require.NoError(t, results[0].Err)
	require.Equal(t, int64(3), results[0].Decision.Remaining)
	require.ErrorIs(t, results[1].Err, sluice.ErrKeyConflict)
	require.NoError(t, results[2].Err)
	require.Equal(t, int64(2), results[2].Decision.Remaining)
	// A key each under one limit (the batch's one-pass path), the
	// conflicting key among keys that do not exist yet.
	fresh1, fresh2 := sluice.Key(tag, "fresh1"), sluice.Key(tag, "fresh2")
	results, err = l.AllowBatch(t.Context(), []sluice.Request{{Key: fresh1, Limit: limit, N: 1}, {Key: bad, Limit: limit, N: 1}, {Key: fresh2, Limit: limit, N: 1}})
	require.NoError(t, err)
	require.NoError(t, results[0].Err)
	require.Equal(t, int64(4), results[0].Decision.Remaining)
	require.ErrorIs(t, results[1].Err, sluice.ErrKeyConflict)
	require.NoError(t, results[2].Err)
	require.Equal(t, int64(4), results[2].Decision.Remaining)
	typ, err := client.Type(t.Context(), bad+tokenbucket.KeySuffix).Result()
	require.NoError(t, err)
	require.Equal(t, "hash", typ, "the conflicting key is untouched")
}
