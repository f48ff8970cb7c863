package redisconn_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/serve/redisconn"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/redistest"
)

// openCounted opens spec with a Conns and returns the limiter, the Conns
// and the func that closes the client (also called, if not yet, when t
// ends).
func openCounted(t *testing.T, spec redisconn.Spec) (*tokenbucket.Limiter, *redisconn.Conns, func()) {
	t.Helper()
	conns := &redisconn.Conns{}
	spec.Conns = conns
	store, closeClient, err := redisconn.Open(context.Background(), spec)
	require.NoError(t, err)
	closed := false
	closeOnce := func() {
		if !closed {
			closed = true
			require.NoError(t, closeClient())
		}
	}
	t.Cleanup(closeOnce)
	l, err := tokenbucket.New(store)
	require.NoError(t, err)
	return l, conns, closeOnce
}

// clients is the number of connections s has from clients under test:
// neither the connection asking (CLIENT LIST), nor a replica's, nor a
// sentinel's.
func clients(t *testing.T, s *redistest.RedisServer) uint64 {
	t.Helper()
	list, err := s.Do("CLIENT", "LIST")
	require.NoError(t, err)
	var n uint64
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		f := map[string]string{}
		for _, kv := range strings.Fields(line) {
			k, v, _ := strings.Cut(kv, "=")
			f[k] = v
		}
		if f["cmd"] == "client|list" || strings.HasPrefix(f["name"], "sentinel-") || strings.ContainsAny(f["flags"], "SM") {
			continue
		}
		n++
	}
	return n
}

// awaitClients waits up to 10 s until s sees as many connections from
// clients as conns counts open (a server frees a connection closed on the
// client's side at its next turn).
func awaitClients(t *testing.T, s *redistest.RedisServer, conns *redisconn.Conns) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		open, seen := conns.Counts().Open, clients(t, s)
		if open == seen {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s has %d connections from the client 10 s on; Conns counts %d open", s.Addr(), seen, open)
		time.Sleep(10 * time.Millisecond)
	}
}

func requireCounts(t *testing.T, conns *redisconn.Conns, created, open, closed uint64) {
	t.Helper()
	require.Equal(t, redisconn.ConnCounts{Created: created, Open: open, Closed: closed}, conns.Counts())
}

// TestConnsCount: a Spec's Conns counts the connections the client makes
// to the servers that hold the data, as the servers see them: Open's PING
// makes one; a connection the server kills counts as closed once the
// client finds it dead, and the call that follows dials another; the
// client's Close closes every one. On a Cluster every primary's count,
// under Sentinel the primary's and not the sentinels'.
func TestConnsCount(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		server := redistest.StartRedis(t)
		l, conns, closeClient := openCounted(t, parse(t, "redis://"+server.Addr()+"/0?pool_size=4"))
		requireCounts(t, conns, 1, 1, 0)
		awaitClients(t, server, conns)
		requireDecides(t, l, sluicetest.UniqueKey(t)+":before")
		requireCounts(t, conns, 1, 1, 0) // the pooled connection again

		// Killed on the server's side: the next call finds the
		// connection dead, in the pool's check or by failing on it (no
		// retry: MaxRetries -1), closes it and dials another.
		_, err := server.Do("CLIENT", "KILL", "TYPE", "normal")
		require.NoError(t, err)
		key := sluice.Key(sluicetest.UniqueKey(t) + ":after")
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := l.AllowN(context.Background(), key, limit, 1)
			if err == nil {
				break
			}
			require.True(t, time.Now().Before(deadline), "no decision 10 s after CLIENT KILL: %v", err)
		}
		requireCounts(t, conns, 2, 1, 1)
		awaitClients(t, server, conns)

		closeClient()
		requireCounts(t, conns, 2, 0, 2)
		awaitClients(t, server, conns)
	})
	t.Run("cluster", func(t *testing.T) {
		cluster := redistest.SharedCluster(t)
		l, conns, closeClient := openCounted(t, parse(t, "redis+cluster://"+cluster.Addrs()[0]))
		// Open pings every primary, each on a connection of its own.
		c := conns.Counts()
		require.GreaterOrEqual(t, c.Created, uint64(len(cluster.Nodes)), "%+v", c)
		require.Equal(t, redisconn.ConnCounts{Created: c.Created, Open: c.Created}, c)
		requireDecides(t, l, sluicetest.UniqueKey(t))
		closeClient()
		c = conns.Counts()
		require.Equal(t, redisconn.ConnCounts{Created: c.Created, Closed: c.Created}, c)
	})
	t.Run("sentinel", func(t *testing.T) {
		g := redistest.StartSentinelGroup(t)
		l, conns, closeClient := openCounted(t, parse(t, "redis+sentinel://"+strings.Join(g.SentinelAddrs(), ",")+"/"+redistest.SentinelMaster))
		// The client asked the sentinels, on connections not counted.
		requireCounts(t, conns, 1, 1, 0)
		awaitClients(t, g.Primary, conns)
		requireDecides(t, l, sluicetest.UniqueKey(t))
		requireCounts(t, conns, 1, 1, 0)
		closeClient()
		requireCounts(t, conns, 1, 0, 1)
		awaitClients(t, g.Primary, conns)
	})
}
