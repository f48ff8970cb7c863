package goredisstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/sluicetest/builtins"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/goredisstore"
)

func TestMain(m *testing.M) { builtins.Main(m) }

// The store accepts every go-redis client kind.
var (
	_ redis.Scripter = (*redis.Client)(nil)
	_ redis.Scripter = (*redis.ClusterClient)(nil)
	_ redis.Scripter = (*redis.Ring)(nil)
)

func newClient(t *testing.T, server *redistest.RedisServer) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: server.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestScriptCacheLoss(t *testing.T) {
	builtins.RunScriptCacheLoss(t, func(t *testing.T, server *redistest.RedisServer) sluice.Store {
		s, err := goredisstore.New(newClient(t, server))
		require.NoError(t, err)
		return s
	})
}

func TestLoadPreloadsScripts(t *testing.T) {
	server := redistest.StartRedis(t)
	c := newClient(t, server)
	s, err := goredisstore.New(c)
	require.NoError(t, err)
	require.NoError(t, s.Load(t.Context(), tokenbucket.Script()))
	exists, err := c.ScriptExists(t.Context(), tokenbucket.Script().SHA1()).Result()
	require.NoError(t, err)
	require.Equal(t, []bool{true}, exists)
	l, err := tokenbucket.New(s)
	require.NoError(t, err)
	_, err = l.AllowN(t.Context(), "k", sluice.PerSecond(1), 1)
	require.NoError(t, err)
	evalsha, err := server.Info("commandstats", "cmdstat_evalsha")
	require.NoError(t, err)
	require.Contains(t, evalsha, "calls=1,")
	_, err = server.Info("commandstats", "cmdstat_eval")
	require.ErrorContains(t, err, "has no field", "no EVAL: the script was cached")
}

// On a Cluster the server refuses keys of different slots (CROSSSLOT);
// the store returns it as an ext.ServerError, which wraps
// sluice.ErrCrossSlot so that callers can split the call.
func TestClusterCrossSlot(t *testing.T) {
	cluster := redistest.SharedCluster(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	s, err := goredisstore.New(c)
	require.NoError(t, err)
	_, err = s.Run(t.Context(), tokenbucket.Script(), []string{sluice.Key("a"), sluice.Key("b")}, []int64{1, 1000000, 1, 1})
	require.ErrorIs(t, err, sluice.ErrCrossSlot)
	require.Equal(t, "CROSSSLOT", ext.ServerCode(err))
	got, err := s.Run(t.Context(), sluice.NewScript("return {#KEYS}", nil), []string{sluice.Key("a", "x"), sluice.Key("a", "y")}, nil)
	require.NoError(t, err, "keys sharing a tag share a slot")
	require.Equal(t, []int64{2}, got)
}

func TestErrors(t *testing.T) {
	server := redistest.SharedRedis(t)
	s, err := goredisstore.New(newClient(t, server))
	require.NoError(t, err)
	builtins.RunStoreErrors(t, server, s)
	t.Run("nil client", func(t *testing.T) {
		for name, c := range map[string]redis.Scripter{
			"nil":                      nil,
			"nil *redis.Client":        (*redis.Client)(nil),
			"nil *redis.ClusterClient": (*redis.ClusterClient)(nil),
			"nil *redis.Ring":          (*redis.Ring)(nil),
		} {
			s, err := goredisstore.New(c)
			require.EqualError(t, err, "goredisstore: the client must not be nil", name)
			require.Nil(t, s, name)
		}
	})
	t.Run("an unreachable server is an error, not a decision", func(t *testing.T) {
		dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
		t.Cleanup(func() { _ = dead.Close() })
		s, err := goredisstore.New(dead)
		require.NoError(t, err)
		l, err := tokenbucket.New(s)
		require.NoError(t, err)
		_, err = l.AllowN(t.Context(), "k", sluice.PerSecond(1), 1)
		require.Error(t, err)
		require.False(t, errors.Is(err, sluice.ErrInvalidLimit))
	})
}
