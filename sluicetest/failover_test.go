package sluicetest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/goredisstore"
	"github.com/sluicehq/sluice/store/rueidisstore"
)

// call is one decision made under a failover: when it started and ended,
// and what it returned.
type call struct {
	start, end time.Time
	allowed    bool
	err        error
}

// failoverRun is what the callers saw around a failover.
type failoverRun struct {
	killed, promoted time.Time
	calls            []call
}

// recovery returns how long after the promotion the last failed call
// ended (0 if none failed after it), and the number of failed calls.
func (r *failoverRun) recovery() (time.Duration, int) {
	var last time.Time
	failed := 0
	for _, c := range r.calls {
		if c.err != nil {
			failed++
			if c.end.After(last) {
				last = c.end
			}
		}
	}
	return max(0, last.Sub(r.promoted)), failed
}

// succeededAfter counts the calls that started after t and were decided.
func (r *failoverRun) succeededAfter(t time.Time) int {
	n := 0
	for _, c := range r.calls {
		if c.start.After(t) && c.err == nil {
			n++
		}
	}
	return n
}

// underFailover calls l on key from 8 goroutines (a 100 ms deadline per
// call), kills the primary with kill, waits for promoted to report the
// replica promoted, and goes on for after more.
func underFailover(t *testing.T, l sluice.Limiter, key string, limit sluice.Limit, kill func(), promoted func() bool, after time.Duration) *failoverRun {
	t.Helper()
	run := &failoverRun{}
	var mu sync.Mutex
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				cctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				start := time.Now()
				d, err := l.AllowN(cctx, key, limit, 1)
				end := time.Now()
				cancel()
				mu.Lock()
				run.calls = append(run.calls, call{start: start, end: end, allowed: d.Allowed, err: err})
				mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	run.killed = time.Now()
	kill()
	deadline := time.Now().Add(20 * time.Second)
	for !promoted() {
		if time.Now().After(deadline) {
			stop()
			wg.Wait()
			t.Fatalf("the replica was not promoted within 20 s of the kill")
		}
		time.Sleep(5 * time.Millisecond)
	}
	run.promoted = time.Now()
	time.Sleep(after)
	stop()
	wg.Wait()
	return run
}

// keyOn returns a Sluice key whose slot the cluster's primary node serves.
func keyOn(cluster *sluicetest.RedisCluster, node *sluicetest.RedisServer, prefix string) string {
	for i := 0; ; i++ {
		key := sluice.Key(fmt.Sprintf("%s-%d", prefix, i))
		if cluster.NodeForSlot(sluice.HashSlot(key)) == node {
			return key
		}
	}
}

// TestClusterFailoverRecoversWithinASecond: kill -9 a Cluster primary under
// load; once its replica is promoted, decisions on the slots it took over
// succeed again within 1 s, through both cluster clients at their
// documented settings. go-redis's ClusterClient re-reads the slot map only
// on a MOVED reply or once a minute, and a dead primary sends no MOVED: the
// store asks it to re-read the map when a call fails on the network.
func TestClusterFailoverRecoversWithinASecond(t *testing.T) {
	clients := []struct {
		name     string
		newStore func(t *testing.T, addrs []string) sluice.Store
	}{
		{"go-redis", func(t *testing.T, addrs []string) sluice.Store {
			c := redis.NewClusterClient(&redis.ClusterOptions{
				Addrs: addrs, MaxRetries: -1, ContextTimeoutEnabled: true,
				DialTimeout: 200 * time.Millisecond, ReadTimeout: 50 * time.Millisecond, WriteTimeout: 50 * time.Millisecond,
			})
			t.Cleanup(func() { _ = c.Close() })
			return goredisstore.New(c)
		}},
		{"rueidis", func(t *testing.T, addrs []string) sluice.Store {
			c, err := rueidis.NewClient(rueidis.ClientOption{
				InitAddress: addrs, DisableCache: true, ConnWriteTimeout: 50 * time.Millisecond,
			})
			require.NoError(t, err)
			t.Cleanup(c.Close)
			return rueidisstore.New(c)
		}},
	}
	for _, client := range clients {
		t.Run(client.name, func(t *testing.T) {
			cluster := sluicetest.StartReplicatedCluster(t, 3)
			l, err := tokenbucket.New(client.newStore(t, cluster.Addrs()))
			require.NoError(t, err)
			primary, replica := cluster.Nodes[0], cluster.Replicas[0]
			key := keyOn(cluster, primary, sluicetest.UniqueKey(t))
			run := underFailover(t, l, key, sluice.PerSecond(1_000_000), primary.Kill, replica.IsPrimary, 2500*time.Millisecond)
			recovery, failed := run.recovery()
			t.Logf("promoted %s after the kill; %d calls, %d failed, the last failure ended %s after the promotion",
				run.promoted.Sub(run.killed).Round(time.Millisecond), len(run.calls), failed, recovery.Round(time.Millisecond))
			require.Less(t, recovery, time.Second, "decisions succeed again within 1 s of the promotion")
			require.Positive(t, run.succeededAfter(run.promoted.Add(recovery)), "and go on succeeding")
		})
	}
}
