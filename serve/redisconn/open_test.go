package redisconn_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/serve/redisconn"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// limit refills one token an hour: in a test, a bucket's Remaining counts
// the decisions taken from it.
var limit = sluice.PerHour(1).WithBurst(10)

// open opens spec, closing the client when t ends.
func open(t *testing.T, spec redisconn.Spec) *tokenbucket.Limiter {
	t.Helper()
	store, closeClient, err := redisconn.Open(context.Background(), spec)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, closeClient()) })
	l, err := tokenbucket.New(store)
	require.NoError(t, err)
	return l
}

func parse(t *testing.T, url string) redisconn.Spec {
	t.Helper()
	spec, err := redisconn.ParseURL(url)
	require.NoError(t, err)
	return spec
}

// requireDecides takes two decisions from a new bucket of key and checks
// that the second sees the first.
func requireDecides(t *testing.T, l *tokenbucket.Limiter, key string) {
	t.Helper()
	for want := limit.Burst - 1; want >= limit.Burst-2; want-- {
		d, err := l.AllowN(context.Background(), sluice.Key(key), limit, 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
		require.Equal(t, want, d.Remaining)
	}
}

// dbsize is the number of keys in s's database db (INFO keyspace).
func dbsize(t *testing.T, s *redistest.RedisServer, db int) int {
	t.Helper()
	info, err := s.Do("INFO", "keyspace")
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "db"+strconv.Itoa(db)+":keys="); ok {
			keys, _, _ := strings.Cut(rest, ",")
			n, err := strconv.Atoi(keys)
			require.NoError(t, err, "INFO keyspace: %s", line)
			return n
		}
	}
	return 0
}

// awaitReplicated waits until replica has every write primary has made
// (WAIT would not do: it waits for its own connection's writes).
func awaitReplicated(t *testing.T, primary, replica *redistest.RedisServer) {
	t.Helper()
	offset := func(s *redistest.RedisServer) int64 {
		o, err := s.Info("replication", "master_repl_offset")
		require.NoError(t, err)
		n, err := strconv.ParseInt(o, 10, 64)
		require.NoError(t, err)
		return n
	}
	want := offset(primary)
	deadline := time.Now().Add(30 * time.Second)
	for offset(replica) < want {
		require.True(t, time.Now().Before(deadline), "the replica has not caught up with offset %d in 30 s", want)
		time.Sleep(10 * time.Millisecond)
	}
}

// TestOpenDecidesOnEachDeployment: a store opened from each URL form
// decides on a real server, a Cluster and a Sentinel group, and its keys
// land where the URL says.
func TestOpenDecidesOnEachDeployment(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		server := redistest.StartRedis(t)
		requireDecides(t, open(t, parse(t, "redis://"+server.Addr()+"/2?pool_size=4")), sluicetest.UniqueKey(t))
		require.Equal(t, 1, dbsize(t, server, 2), "the bucket is in database 2")
		require.Zero(t, dbsize(t, server, 0))
	})
	t.Run("cluster", func(t *testing.T) {
		cluster := redistest.SharedCluster(t)
		l := open(t, parse(t, "redis+cluster://"+strings.Join(cluster.Addrs()[:1], ",")))
		// Keys across the slots until every primary holds one: the client
		// found the whole Cluster through one seed node.
		before := make([]int, len(cluster.Nodes))
		for i, n := range cluster.Nodes {
			before[i] = dbsize(t, n, 0)
		}
		everyNode := func() bool {
			for i, n := range cluster.Nodes {
				if dbsize(t, n, 0) == before[i] {
					return false
				}
			}
			return true
		}
		keys := 0
		for ; keys < 300 && !everyNode(); keys++ {
			requireDecides(t, l, sluicetest.UniqueKey(t)+":"+strconv.Itoa(keys))
		}
		t.Logf("%d keys to reach the %d primaries", keys, len(cluster.Nodes))
		require.True(t, everyNode(), "buckets on every primary")
	})
	t.Run("sentinel", func(t *testing.T) {
		group := redistest.StartSentinelGroup(t)
		url := "redis+sentinel://" + strings.Join(group.SentinelAddrs(), ",") + "/" + redistest.SentinelMaster + "/1"
		requireDecides(t, open(t, parse(t, url)), sluicetest.UniqueKey(t))
		require.Equal(t, 1, dbsize(t, group.Primary, 1), "the bucket is on the primary, in database 1")
	})
	t.Run("envoy cluster", func(t *testing.T) {
		cluster := redistest.SharedCluster(t)
		spec, err := redisconn.FromEnvoy("unix", "CLUSTER", strings.Join(cluster.Addrs(), ","), "", "", false, 10, 0)
		require.NoError(t, err)
		requireDecides(t, open(t, spec), sluicetest.UniqueKey(t))
	})
}

// TestSentinelFailoverKeepsDeciding: kill -9 the primary; once the
// sentinels name the replica, the same store decides again, on the
// replica, from the bucket the old primary had replicated to it.
func TestSentinelFailoverKeepsDeciding(t *testing.T) {
	group := redistest.StartSentinelGroup(t)
	spec, err := redisconn.FromEnvoy("tcp", "sentinel", redistest.SentinelMaster+","+strings.Join(group.SentinelAddrs(), ","), "", "", false, 0, 0)
	require.NoError(t, err)
	l := open(t, spec)
	key := sluice.Key(sluicetest.UniqueKey(t))
	ctx := context.Background()
	d, err := l.AllowN(ctx, key, limit, 1)
	require.NoError(t, err)
	require.Equal(t, limit.Burst-1, d.Remaining)
	awaitReplicated(t, group.Primary, group.Replica)

	group.Primary.Kill()
	require.NoError(t, group.AwaitFailover(group.Replica))
	announced := time.Now()
	var calls int
	for {
		calls++
		d, err = l.AllowN(ctx, key, limit, 1)
		if err == nil {
			break
		}
		// go-redis follows the sentinels' announcement within about 1.5 s
		// (docs/failure.md); 30 s leaves a loaded machine room.
		require.Less(t, time.Since(announced), 30*time.Second, "the store decides again after the failover: %v", err)
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("decided again %s after the sentinels agreed, at call %d", time.Since(announced).Round(time.Millisecond), calls)
	require.True(t, d.Allowed)
	require.Equal(t, limit.Burst-2, d.Remaining, "the replicated bucket, one more token taken")
	require.True(t, group.Replica.IsPrimary())
}

// TestClusterFailoverKeepsDeciding: kill -9 a primary of a replicated
// Cluster; once its replica is promoted, the same store decides again on
// every bucket, those the dead primary held included, from their
// replicated state.
func TestClusterFailoverKeepsDeciding(t *testing.T) {
	cluster := redistest.StartReplicatedCluster(t, 3)
	l := open(t, parse(t, "redis+cluster://"+strings.Join(cluster.Addrs(), ",")))
	ctx := context.Background()
	var keys []string
	for i := 0; i < 300 && dbsize(t, cluster.Nodes[0], 0) < 3; i++ {
		key := sluice.Key(sluicetest.UniqueKey(t) + ":" + strconv.Itoa(i))
		d, err := l.AllowN(ctx, key, limit, 1)
		require.NoError(t, err)
		require.Equal(t, limit.Burst-1, d.Remaining)
		keys = append(keys, key)
	}
	onKilled := dbsize(t, cluster.Nodes[0], 0)
	require.GreaterOrEqual(t, onKilled, 3, "buckets on the primary to kill")
	awaitReplicated(t, cluster.Nodes[0], cluster.Replicas[0])

	cluster.Nodes[0].Kill()
	require.NoError(t, cluster.AwaitPromoted(cluster.Replicas[0]))
	promoted := time.Now()
	for _, key := range keys {
		for {
			d, err := l.AllowN(ctx, key, limit, 1)
			if err == nil {
				require.Equal(t, limit.Burst-2, d.Remaining, "%s: the replicated bucket, one more token taken", key)
				break
			}
			// goredisstore re-reads the slot map on such a failure and
			// reaches the promoted replica within a second
			// (docs/failure.md); 30 s leaves a loaded machine room.
			require.Less(t, time.Since(promoted), 30*time.Second, "the store decides again after the promotion: %v", err)
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("every one of %d buckets (%d on the killed primary) decided again %s after the promotion",
		len(keys), onKilled, time.Since(promoted).Round(time.Millisecond))
	require.Equal(t, onKilled, dbsize(t, cluster.Replicas[0], 0), "the promoted replica holds the dead primary's buckets")
}

// TestOpenAuthenticates: a password alone and an ACL user's name and
// password open a store on a protected server; a wrong or missing
// password is an error that names the server without the password, and
// leaves no connection open.
func TestOpenAuthenticates(t *testing.T) {
	server := redistest.StartRedis(t)
	_, err := server.Do("ACL", "SETUSER", "alice", "on", ">wonderland", "~*", "&*", "+@all")
	require.NoError(t, err)
	_, err = server.Do("CONFIG", "SET", "requirepass", "s3cret")
	require.NoError(t, err)
	admin := redis.NewClient(&redis.Options{Addr: server.Addr(), Password: "s3cret", PoolSize: 1})
	t.Cleanup(func() { _ = admin.Close() })

	envoy, err := redisconn.FromEnvoy("tcp", "single", server.Addr(), "alice:wonderland", "", false, 10, 0)
	require.NoError(t, err)
	for name, spec := range map[string]redisconn.Spec{
		"password":             parse(t, "redis://:s3cret@"+server.Addr()),
		"user and password":    parse(t, "redis://alice:wonderland@"+server.Addr()+"/0"),
		"REDIS_AUTH user:pass": envoy,
	} {
		t.Run(name, func(t *testing.T) { requireDecides(t, open(t, spec), sluicetest.UniqueKey(t)) })
	}
	for _, c := range []struct{ url, want string }{
		{"redis://:hunter2@" + server.Addr(), "WRONGPASS"},
		{"redis://alice:hunter2@" + server.Addr(), "WRONGPASS"},
		{"redis://" + server.Addr(), "NOAUTH"},
	} {
		_, _, err := redisconn.Open(context.Background(), parse(t, c.url))
		require.Error(t, err)
		require.Contains(t, err.Error(), c.want)
		require.Contains(t, err.Error(), "Redis does not answer")
		require.NotContains(t, err.Error(), "hunter2")
	}
	// Only the admin's own connection is left (the server sees a closed
	// connection as soon as it reads its end).
	deadline := time.Now().Add(10 * time.Second)
	for {
		clients, err := admin.Info(context.Background(), "clients").Result()
		require.NoError(t, err)
		if strings.Contains(clients, "connected_clients:1\r\n") {
			break
		}
		require.True(t, time.Now().Before(deadline), "every failed Open closed its connections: %s", clients)
		time.Sleep(10 * time.Millisecond)
	}
}

// TestOpenRefuses: a Spec that cannot work, a server that is not what the
// Spec says and no server at all are errors, the last two once Open has
// tried.
func TestOpenRefuses(t *testing.T) {
	server := redistest.StartRedis(t)
	for _, c := range []struct {
		name string
		spec redisconn.Spec
		want string
	}{
		{"no type", redisconn.Spec{Addrs: []string{server.Addr()}}, `unknown Redis type ""`},
		{"no address", redisconn.Spec{Type: "single"}, "no address"},
		{"a cluster on a unix socket", redisconn.Spec{Type: "cluster", Network: "unix", Addrs: []string{"/tmp/x.sock"}}, "reached over tcp"},
		{"sentinel without a master", redisconn.Spec{Type: "sentinel", Addrs: []string{server.Addr()}}, "no master name"},
		{"a master name for a single node", redisconn.Spec{Type: "single", Addrs: []string{server.Addr()}, MasterName: "m"}, "for Sentinel only"},
		{"a cluster's database", redisconn.Spec{Type: "cluster", Addrs: []string{server.Addr()}, DB: 1}, "database 0 only"},
		{"a negative pool", redisconn.Spec{Type: "single", Addrs: []string{server.Addr()}, PoolSize: -1}, "pool size -1"},
		{"a server that is not a Cluster", parse(t, "redis+cluster://"+server.Addr()), "Redis does not answer"},
		{"a server that is not a sentinel", parse(t, "redis+sentinel://"+server.Addr()+"/m"), "Redis does not answer"},
		{"nothing listening", parse(t, "redis://127.0.0.1:1"), "Redis does not answer"},
		{"nothing listening on the socket", parse(t, "unix://"+t.TempDir()+"/none.sock"), "Redis does not answer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := redisconn.Open(context.Background(), c.spec)
			require.Error(t, err)
			require.Contains(t, err.Error(), c.want)
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := redisconn.Open(ctx, parse(t, "redis://"+server.Addr()))
	require.ErrorIs(t, err, context.Canceled, "Open honours its context")
}
