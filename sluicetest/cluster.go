package sluicetest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// RedisCluster is a throwaway Redis Cluster of primaries on loopback, each
// a [RedisServer] with its own port and directory.
type RedisCluster struct {
	Nodes []*RedisServer
}

// StartCluster starts a Redis Cluster of n primaries (at least 3), assigns
// the 16384 slots evenly, joins the nodes and waits until every node
// reports cluster_state:ok. Cleanup stops every node.
func StartCluster(tb testing.TB, n int) *RedisCluster {
	tb.Helper()
	path := RequireRedisServer(tb)
	var dirs []string
	for range n {
		dirs = append(dirs, tb.TempDir())
	}
	c, err := startCluster(path, dirs)
	if c != nil {
		tb.Cleanup(func() {
			for _, node := range c.Nodes {
				node.Stop()
			}
		})
	}
	if err != nil {
		tb.Fatalf("start cluster: %v", err)
	}
	return c
}

// SharedCluster returns the 3-primary Redis Cluster shared by the tests of
// this test binary, starting it on first use; [Main] stops it. Tests that
// share it use distinct keys and must not reconfigure it.
func SharedCluster(tb testing.TB) *RedisCluster {
	tb.Helper()
	path := RequireRedisServer(tb)
	if !shared.mainRunning {
		tb.Fatalf("sluicetest.SharedCluster needs the package's TestMain to call sluicetest.Main, which stops it")
	}
	shared.clusterOnce.Do(func() {
		for range 3 {
			dir, err := os.MkdirTemp("", "sluicetest-cluster-")
			if err != nil {
				shared.clusterErr = err
				return
			}
			shared.clusterDirs = append(shared.clusterDirs, dir)
		}
		shared.cluster, shared.clusterErr = startCluster(path, shared.clusterDirs)
	})
	if shared.clusterErr != nil {
		tb.Fatalf("start shared cluster: %v", shared.clusterErr)
	}
	return shared.cluster
}

// startCluster starts one cluster node per directory and joins them. On
// error it returns the nodes started so far, for the caller to stop.
func startCluster(path string, dirs []string) (*RedisCluster, error) {
	n := len(dirs)
	if n < 3 {
		return nil, fmt.Errorf("a Redis Cluster needs at least 3 primaries, got %d", n)
	}
	c := &RedisCluster{}
	for _, dir := range dirs {
		node, err := startRedis(path, dir, []string{"--cluster-enabled", "yes", "--cluster-node-timeout", "2000"})
		if err != nil {
			return c, err
		}
		c.Nodes = append(c.Nodes, node)
	}
	for i, node := range c.Nodes {
		first, last := i*16384/n, (i+1)*16384/n-1
		if _, err := node.Do("CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(first), strconv.Itoa(last)); err != nil {
			return c, fmt.Errorf("assign slots %d-%d to %s: %w", first, last, node.Addr(), err)
		}
	}
	for _, node := range c.Nodes[1:] {
		if _, err := c.Nodes[0].Do("CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(node.port)); err != nil {
			return c, fmt.Errorf("cluster meet %s: %w", node.Addr(), err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, node := range c.Nodes {
		for {
			info, err := node.Do("CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", n)) {
				break
			}
			if time.Now().After(deadline) {
				return c, fmt.Errorf("cluster not ok after 30s: %s: %q %v", node.Addr(), info, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c, nil
}

// Addrs returns the nodes' addresses.
func (c *RedisCluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// NodeForSlot returns the node that serves slot, as assigned by
// StartCluster.
func (c *RedisCluster) NodeForSlot(slot int) *RedisServer {
	n := len(c.Nodes)
	for i := range c.Nodes {
		if slot <= (i+1)*16384/n-1 {
			return c.Nodes[i]
		}
	}
	return c.Nodes[n-1]
}
