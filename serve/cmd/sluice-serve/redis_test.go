package main

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/sluicetest/redistest"
)

// TestOnARedisCluster: sluice-serve --redis redis+cluster://... given one
// seed node decides on the Cluster: each descriptor's bucket counts down
// across calls, and the buckets are spread over every primary.
func TestOnARedisCluster(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	url := "redis+cluster://" + cluster.Addrs()[1]
	p := start(t, "domain: edge\npolicies:\n  - {name: p, match: [{key: user}], rate: 5, period: 1h}\n", "--redis", url)
	require.Contains(t, p.logs(), `msg="sluice serve: on Redis" redis=`+url)
	keysOn := func(n *redistest.RedisServer) int {
		info, err := n.Do("INFO", "keyspace")
		require.NoError(t, err)
		_, rest, _ := strings.Cut(info, "db0:keys=")
		keys, _, _ := strings.Cut(rest, ",")
		count, _ := strconv.Atoi(keys) // no db0 line: no key, 0
		return count
	}
	everyPrimary := func() bool {
		for _, n := range cluster.Nodes {
			if keysOn(n) == 0 {
				return false
			}
		}
		return true
	}
	users := 0
	for ; users < 300 && !everyPrimary(); users++ {
		for want := uint32(4); want >= 3; want-- {
			resp, err := ask(p, "user", "u"+strconv.Itoa(users))
			require.NoError(t, err)
			require.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode())
			require.Equal(t, want, resp.GetStatuses()[0].GetLimitRemaining())
		}
	}
	t.Logf("%d users' buckets to reach the %d primaries", users, len(cluster.Nodes))
	require.True(t, everyPrimary(), "buckets on every primary")
}

// TestOnSentinel: sluice-serve --redis redis+sentinel://.../master decides
// on the primary the sentinels monitor: a descriptor's bucket counts down,
// and its key is on that primary.
func TestOnSentinel(t *testing.T) {
	group := redistest.StartSentinelGroup(t)
	url := "redis+sentinel://" + strings.Join(group.SentinelAddrs(), ",") + "/" + redistest.SentinelMaster
	p := start(t, "domain: edge\npolicies:\n  - {name: p, match: [{key: user}], rate: 3, period: 1h}\n", "--redis", url)
	require.Contains(t, p.logs(), `msg="sluice serve: on Redis" redis=`+url)
	for _, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		resp, err := ask(p, "user", "u1")
		require.NoError(t, err)
		require.Equal(t, want, resp.GetOverallCode())
	}
	n, err := group.Primary.Do("DBSIZE")
	require.NoError(t, err)
	require.Equal(t, "1", n, "the bucket is on the primary the sentinels name")
}

// TestRedisAuto: --redis auto starts a throwaway redis-server, decides on
// it (its key is there), and stops it with the server: after SIGTERM,
// sluice-serve exits 0 and the redis-server's pid is gone. With no
// --redis, the embedded store is used and said so.
func TestRedisAuto(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		redistest.StartRedis(t) // skips, or fails under SLUICE_REQUIRE_REDIS=1, as every real-Redis test
	}
	const config = "domain: edge\npolicies:\n  - {name: p, match: [{key: user}], rate: 3, period: 1h}\n"
	p := start(t, config, "--redis", "auto")
	m := regexp.MustCompile(`msg="sluice serve: started redis-server" pid=(\d+) addr=(\S+)`).FindStringSubmatch(p.logs())
	require.NotNil(t, m, p.logs())
	pid, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	var codes []string
	for range 4 {
		resp, err := ask(p, "user", "auto")
		require.NoError(t, err)
		codes = append(codes, resp.GetOverallCode().String())
	}
	require.Equal(t, "OK,OK,OK,OVER_LIMIT", strings.Join(codes, ","))
	client := redis.NewClient(&redis.Options{Addr: m[2]})
	keys, err := client.Keys(context.Background(), "*").Result()
	_ = client.Close()
	require.NoError(t, err)
	require.Len(t, keys, 1, "the descriptor's bucket on the throwaway redis-server")

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, p.wait(t), p.logs())
	require.Eventually(t, func() bool { return syscall.Kill(pid, 0) == syscall.ESRCH }, 20*time.Second, 20*time.Millisecond,
		"redis-server %d still runs after sluice-serve stopped", pid)

	embedded := start(t, config)
	require.Contains(t, embedded.logs(), "on the embedded store")
}
