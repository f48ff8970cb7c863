package main

import (
	"strconv"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
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
