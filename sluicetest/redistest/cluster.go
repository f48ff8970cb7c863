package redistest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// RedisCluster is a throwaway Redis Cluster on loopback, each node a
// [RedisServer] with its own port and directory.
type RedisCluster struct {
	// Nodes are the primaries, in slot order.
	Nodes []*RedisServer
	// Replicas, when the cluster has them, holds Nodes[i]'s replica at i.
	Replicas []*RedisServer
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
		tb.Fatalf("redistest.SharedCluster needs the package's TestMain to call redistest.Main (or builtins.Main, which calls it), which stops it")
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
		node, err := startRedis(path, dir, clusterArgs(2000))
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

func clusterArgs(nodeTimeoutMillis int) []string {
	return []string{"--cluster-enabled", "yes", "--cluster-node-timeout", strconv.Itoa(nodeTimeoutMillis)}
}

// ClusterNodeTimeout is the cluster-node-timeout of the clusters
// [StartReplicatedCluster] starts: a primary that does not answer for this
// long is failed over to its replica, which takes about twice as long.
const ClusterNodeTimeout = time.Second

// StartReplicatedCluster starts a Redis Cluster of n primaries (at least
// 3), each with one replica, so that a test can kill a primary and watch
// the failover. Replicas[i] replicates Nodes[i]. It returns once every node
// reports cluster_state:ok and every replica's link to its primary is up.
// Cleanup stops every node.
func StartReplicatedCluster(tb testing.TB, n int) *RedisCluster {
	tb.Helper()
	path := RequireRedisServer(tb)
	var dirs []string
	for range n {
		dirs = append(dirs, tb.TempDir())
	}
	c, err := startCluster(path, dirs)
	if c != nil {
		tb.Cleanup(func() {
			for _, node := range append(c.Nodes, c.Replicas...) {
				node.Stop()
			}
		})
	}
	if err != nil {
		tb.Fatalf("start cluster: %v", err)
	}
	if err := c.addReplicas(path, tb); err != nil {
		tb.Fatalf("start cluster replicas: %v", err)
	}
	return c
}

// addReplicas starts one replica per primary, joins it to the cluster and
// makes it replicate its primary.
func (c *RedisCluster) addReplicas(path string, tb testing.TB) error {
	for _, primary := range c.Nodes {
		id, err := primary.Do("CLUSTER", "MYID")
		if err != nil {
			return fmt.Errorf("cluster myid of %s: %w", primary.Addr(), err)
		}
		replica, err := startRedis(path, tb.TempDir(), clusterArgs(int(ClusterNodeTimeout/time.Millisecond)))
		if err != nil {
			return err
		}
		c.Replicas = append(c.Replicas, replica)
		if _, err := replica.Do("CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(primary.port)); err != nil {
			return fmt.Errorf("cluster meet from %s: %w", replica.Addr(), err)
		}
		// The replica must have heard of its primary before it can
		// replicate it.
		if err := waitFor(10*time.Second, func() error {
			_, err := replica.Do("CLUSTER", "REPLICATE", id)
			return err
		}); err != nil {
			return fmt.Errorf("cluster replicate %s from %s: %w", primary.Addr(), replica.Addr(), err)
		}
	}
	// The primaries came up with the longer node timeout of StartCluster:
	// give them the replicas' so that a failover takes seconds.
	for _, primary := range c.Nodes {
		if _, err := primary.Do("CONFIG", "SET", "cluster-node-timeout", strconv.Itoa(int(ClusterNodeTimeout/time.Millisecond))); err != nil {
			return err
		}
	}
	known := fmt.Sprintf("cluster_known_nodes:%d", 2*len(c.Nodes))
	for _, node := range append(c.Nodes, c.Replicas...) {
		if err := waitFor(30*time.Second, func() error {
			info, err := node.Do("CLUSTER", "INFO")
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, known) {
				return fmt.Errorf("%s: %q", node.Addr(), info)
			}
			return nil
		}); err != nil {
			return fmt.Errorf("cluster not ok: %w", err)
		}
	}
	for _, replica := range c.Replicas {
		if err := waitForReplicaLink(replica); err != nil {
			return err
		}
	}
	return nil
}

// waitForReplicaLink waits until replica's link to its primary is up and
// the initial sync is done.
func waitForReplicaLink(replica *RedisServer) error {
	return waitFor(30*time.Second, func() error {
		status, err := replica.Info("replication", "master_link_status")
		if err != nil {
			return err
		}
		if status != "up" {
			return fmt.Errorf("replica %s: master_link_status:%s", replica.Addr(), status)
		}
		return nil
	})
}

// waitFor calls check every 20 ms until it returns nil, and returns its
// last error if that takes longer than timeout.
func waitFor(timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// IsPrimary reports whether s says it is a primary (INFO replication
// role:master); false if it does not answer.
func (s *RedisServer) IsPrimary() bool {
	role, err := s.Info("replication", "role")
	return err == nil && role == "master"
}
