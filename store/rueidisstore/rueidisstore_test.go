package rueidisstore_test

import (
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/sluicetest/builtins"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/rueidisstore"
)

func TestMain(m *testing.M) { builtins.Main(m) }

func newClient(t *testing.T, server *redistest.RedisServer) rueidis.Client {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{server.Addr()}, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func TestScriptCacheLoss(t *testing.T) {
	builtins.RunScriptCacheLoss(t, func(t *testing.T, server *redistest.RedisServer) sluice.Store {
		s, err := rueidisstore.New(newClient(t, server))
		require.NoError(t, err)
		return s
	})
}

func TestLoadPreloadsScripts(t *testing.T) {
	server := redistest.StartRedis(t)
	c := newClient(t, server)
	s, err := rueidisstore.New(c)
	require.NoError(t, err)
	require.NoError(t, s.Load(t.Context(), tokenbucket.Script()))
	exists, err := c.Do(t.Context(), c.B().ScriptExists().Sha1(tokenbucket.Script().SHA1()).Build()).AsIntSlice()
	require.NoError(t, err)
	require.Equal(t, []int64{1}, exists)
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

func TestClusterCrossSlot(t *testing.T) {
	cluster := redistest.SharedCluster(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cluster.Addrs(), DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	s, err := rueidisstore.New(c)
	require.NoError(t, err)
	_, err = s.Run(t.Context(), tokenbucket.Script(), []string{sluice.Key("a"), sluice.Key("b")}, []int64{1, 1000000, 1, 1})
	require.ErrorIs(t, err, rueidisstore.ErrCrossSlot, "an error, not the command builder's panic")
	require.ErrorIs(t, err, sluice.ErrCrossSlot)
	got, err := s.Run(t.Context(), sluice.NewScript("return {#KEYS}", nil), []string{sluice.Key("a", "x"), sluice.Key("a", "y")}, nil)
	require.NoError(t, err, "keys sharing a tag share a slot")
	require.Equal(t, []int64{2}, got)
}

func TestErrors(t *testing.T) {
	server := redistest.SharedRedis(t)
	s, err := rueidisstore.New(newClient(t, server))
	require.NoError(t, err)
	builtins.RunStoreErrors(t, server, s)
	t.Run("nil client", func(t *testing.T) {
		s, err := rueidisstore.New(nil)
		require.EqualError(t, err, "rueidisstore: the client must not be nil")
		require.Nil(t, s)
		// An interface holding a nil pointer is refused too.
		var typedNil *nilClient
		s, err = rueidisstore.New(typedNil)
		require.EqualError(t, err, "rueidisstore: the client must not be nil")
		require.Nil(t, s)
	})
}

// nilClient is a rueidis.Client implementation whose nil pointer stands in
// for a typed nil client (rueidis's own client types are unexported).
type nilClient struct{ rueidis.Client }
