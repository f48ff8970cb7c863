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
	for _, node := range c.Nodes {
		if err := waitFor(func() error { return clusterOK(node, n) }); err != nil {
			return c, fmt.Errorf("cluster not ok: %w", err)
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
		if err := waitFor(func() error {
			_, err := replica.Do("CLUSTER", "REPLICATE", id)
			if err != nil {
				known, _ := replica.Info("cluster", "cluster_known_nodes")
				return fmt.Errorf("cluster replicate %s from %s (it knows %s nodes): %w", primary.Addr(), replica.Addr(), known, err)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	// The primaries came up with the longer node timeout of StartCluster:
	// give them the replicas' so that a failover takes seconds.
	for _, primary := range c.Nodes {
		if _, err := primary.Do("CONFIG", "SET", "cluster-node-timeout", strconv.Itoa(int(ClusterNodeTimeout/time.Millisecond))); err != nil {
			return err
		}
	}
	for _, node := range append(c.Nodes, c.Replicas...) {
		if err := waitFor(func() error { return clusterOK(node, 2*len(c.Nodes)) }); err != nil {
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

// clusterOK returns nil once node reports cluster_state:ok and knows n
// nodes, and otherwise what it reports.
func clusterOK(node *RedisServer, n int) error {
	info, err := node.Do("CLUSTER", "INFO")
	if err != nil {
		return fmt.Errorf("%s: %w", node.Addr(), err)
	}
	keys := []string{"cluster_state", "cluster_known_nodes", "cluster_slots_assigned", "cluster_current_epoch"}
	f := fields(info, keys...)
	if f["cluster_state"] != "ok" || f["cluster_known_nodes"] != strconv.Itoa(n) {
		return fmt.Errorf("%s (to know %d nodes): %s", node.Addr(), n, describe(f, keys...))
	}
	return nil
}

// waitForReplicaLink waits until replica's link to its primary is up and
// the initial sync is done.
func waitForReplicaLink(replica *RedisServer) error {
	return waitFor(func() error {
		info, err := replica.Do("INFO", "replication")
		if err != nil {
			return fmt.Errorf("replica %s: %w", replica.Addr(), err)
		}
		keys := []string{"master_link_status", "master_sync_in_progress", "master_sync_read_bytes"}
		f := fields(info, keys...)
		if f["master_link_status"] != "up" {
			return fmt.Errorf("replica %s: %s", replica.Addr(), describe(f, keys...))
		}
		return nil
	})
}

// IsPrimary reports whether s says it is a primary (INFO replication
// role:master); false if it does not answer.
func (s *RedisServer) IsPrimary() bool {
	role, err := s.Info("replication", "role")
	return err == nil && role == "master"
}

// clusterAuthRetry is how soon a replica whose election failed tries
// again: twice its election's timeout, max(2 x cluster-node-timeout, 2 s)
// (Redis's cluster.c).
const clusterAuthRetry = 2 * max(2*ClusterNodeTimeout, 2*time.Second)

// AwaitPromoted waits, once a primary of a cluster from
// [StartReplicatedCluster] is dead, until replica, its replica, says it is
// a primary ([RedisServer.IsPrimary]). It waits for as long as the
// replica shows a failover under way or to come, with a patience taken
// from Redis Cluster's timers, not from the machine's speed, and returns
// an error that says what the replica showed last when:
//
//   - for ClusterNodeTimeout + 10 s, the replica has not shown its
//     primary as failing (fail? or fail): no failover is happening;
//   - what it shows (its role, its primary's flags, the cluster's state
//     and epoch: each election bumps the epoch) has not changed for an
//     election's retry time (4 s) + 1 s + 5 s: the failover is stuck;
//   - or it is not a primary after 2 x ClusterNodeTimeout (the failure's
//     detection) + 4 elections + 5 s: the elections keep failing.
func (c *RedisCluster) AwaitPromoted(replica *RedisServer) error {
	const margin = 5 * time.Second
	idle := ClusterNodeTimeout + 10*time.Second
	quiet := clusterAuthRetry + time.Second + margin
	limit := 2*ClusterNodeTimeout + 4*clusterAuthRetry + margin
	start := time.Now()
	var (
		lastLook      time.Time
		seen          string
		changed, busy = start, start
	)
	for !replica.IsPrimary() {
		now := time.Now()
		if now.Sub(lastLook) >= 100*time.Millisecond {
			lastLook = now
			view, failing := viewClusterReplica(replica)
			if failing {
				busy = now
			}
			if view != seen {
				seen, changed = view, now
			}
		}
		switch elapsed := now.Sub(start); {
		case now.Sub(busy) > idle:
			return fmt.Errorf("replica %s has not shown its primary failing for %s (after %s in all): %s",
				replica.Addr(), now.Sub(busy).Round(time.Millisecond), elapsed.Round(time.Millisecond), seen)
		case now.Sub(changed) > quiet:
			return fmt.Errorf("the failover is stuck: replica %s has shown the same for %s (after %s in all): %s",
				replica.Addr(), now.Sub(changed).Round(time.Millisecond), elapsed.Round(time.Millisecond), seen)
		case elapsed > limit:
			return fmt.Errorf("replica %s is not a primary after %s: %s", replica.Addr(), elapsed.Round(time.Millisecond), seen)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// viewClusterReplica describes what replica shows of its failover: its
// role, its primary's flags, and the cluster's state and epoch; failing
// is whether it shows the primary failing (fail? or fail) or itself
// promoted.
func viewClusterReplica(replica *RedisServer) (view string, failing bool) {
	role, err := replica.Info("replication", "role")
	if err != nil {
		return "INFO: " + err.Error(), false
	}
	info, err := replica.Do("CLUSTER", "INFO")
	if err != nil {
		return "CLUSTER INFO: " + err.Error(), false
	}
	nodes, err := replica.Do("CLUSTER", "NODES")
	if err != nil {
		return "CLUSTER NODES: " + err.Error(), false
	}
	lines := map[string][]string{}
	var primary string
	for line := range strings.SplitSeq(strings.TrimSpace(nodes), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		lines[f[0]] = f
		if strings.Contains(f[2], "myself") {
			primary = f[3]
		}
	}
	primaryFlags := "?"
	if p, ok := lines[primary]; ok {
		primaryFlags = p[2]
	}
	failing = role == "master" || strings.Contains(primaryFlags, "fail")
	keys := []string{"cluster_state", "cluster_current_epoch"}
	return fmt.Sprintf("role:%s primary %s flags:%s %s", role, primary, primaryFlags, describe(fields(info, keys...), keys...)), failing
}
