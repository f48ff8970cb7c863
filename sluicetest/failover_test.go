package sluicetest_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/builtins"
	"github.com/sluicehq/sluice/sluicetest/redistest"
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

// recovery returns how long after the promotion the last failed call of
// the outage ended (0 if none failed after it), the number of calls that
// failed in it, and the number that failed while the limiter was
// deciding: a call within whose start and end another call was decided
// (it started and ended) failed for its own slowness, not for want of a
// primary. On a loaded machine that keeps a caller from the CPU past its
// 100 ms deadline, such calls fail long after the client recovered; they
// are not part of the outage.
func (r *failoverRun) recovery() (recovery time.Duration, failed, slow int) {
	var decided []call // by start
	for _, c := range r.calls {
		if c.err == nil {
			decided = append(decided, c)
		}
	}
	slices.SortFunc(decided, func(a, b call) int { return a.start.Compare(b.start) })
	// firstEnd[i] is the earliest end of decided[i:].
	firstEnd := make([]time.Time, len(decided)+1)
	firstEnd[len(decided)] = time.Unix(1<<62, 0)
	for i := len(decided) - 1; i >= 0; i-- {
		firstEnd[i] = firstEnd[i+1]
		if decided[i].end.Before(firstEnd[i]) {
			firstEnd[i] = decided[i].end
		}
	}
	var last time.Time
	for _, c := range r.calls {
		if c.err == nil {
			continue
		}
		i, _ := slices.BinarySearchFunc(decided, c.start, func(d call, t time.Time) int { return d.start.Compare(t) })
		if !firstEnd[i].After(c.end) { // a call started and was decided within c
			slow++
			continue
		}
		failed++
		if c.end.After(last) {
			last = c.end
		}
	}
	return max(0, last.Sub(r.promoted)), failed, slow
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
// call), kills the primary with kill, waits with await for the replica's
// promotion, and goes on for after more. await waits for as long as the
// failover is visibly under way, however long a loaded machine makes it
// take, and its error says what it saw last.
func underFailover(t *testing.T, l sluice.Limiter, key string, limit sluice.Limit, kill func(), await func() error, after time.Duration) *failoverRun {
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
	if err := await(); err != nil {
		stop()
		wg.Wait()
		t.Fatalf("the replica was not promoted, %s after the kill: %v", time.Since(run.killed).Round(time.Millisecond), err)
	}
	run.promoted = time.Now()
	time.Sleep(after)
	stop()
	wg.Wait()
	return run
}

// keyOn returns a Sluice key whose slot the cluster's primary node serves.
func keyOn(cluster *redistest.RedisCluster, node *redistest.RedisServer, prefix string) string {
	for i := 0; ; i++ {
		key := sluice.Key(fmt.Sprintf("%s-%d", prefix, i))
		if cluster.NodeForSlot(ext.HashSlot(key)) == node {
			return key
		}
	}
}

// TestClusterFailover: kill -9 a Cluster primary under
// load; once its replica is promoted, decisions on the slots it took over
// succeed again within 1 s through go-redis's ClusterClient (2 s through
// rueidis, whose refresh waits a random delay), both at their documented
// settings. go-redis's ClusterClient re-reads the slot map only
// on a MOVED reply or once a minute, and a dead primary sends no MOVED: the
// store asks it to re-read the map when a call fails on the network. The
// promotion is awaited for as long as the replica shows it under way
// ([redistest.RedisCluster.AwaitPromoted]), and a call that fails while
// others are decided is the load's, not the outage's (see recovery).
func TestClusterFailover(t *testing.T) {
	clients := []struct {
		name string
		// recoversWithin is how soon after the promotion the decisions
		// succeed again. rueidis, on an error, re-reads the slot map
		// after a random delay of up to 1 s (on clusters of under 100
		// nodes), and one read may come before the promotion.
		recoversWithin time.Duration
		newStore       func(t *testing.T, addrs []string) sluice.Store
	}{
		{"go-redis", time.Second, func(t *testing.T, addrs []string) sluice.Store {
			c := redis.NewClusterClient(&redis.ClusterOptions{
				Addrs: addrs, MaxRetries: -1, ContextTimeoutEnabled: true,
				DialTimeout: 200 * time.Millisecond, ReadTimeout: 50 * time.Millisecond, WriteTimeout: 50 * time.Millisecond,
			})
			t.Cleanup(func() { _ = c.Close() })
			s, err := goredisstore.New(c)
			require.NoError(t, err)
			return s
		}},
		{"rueidis", 2 * time.Second, func(t *testing.T, addrs []string) sluice.Store {
			c, err := rueidis.NewClient(rueidis.ClientOption{
				InitAddress: addrs, DisableCache: true, ConnWriteTimeout: 50 * time.Millisecond,
			})
			require.NoError(t, err)
			t.Cleanup(c.Close)
			s, err := rueidisstore.New(c)
			require.NoError(t, err)
			return s
		}},
	}
	for _, client := range clients {
		t.Run(client.name, func(t *testing.T) {
			cluster := redistest.StartReplicatedCluster(t, 3)
			l, err := tokenbucket.New(client.newStore(t, cluster.Addrs()))
			require.NoError(t, err)
			primary, replica := cluster.Nodes[0], cluster.Replicas[0]
			key := keyOn(cluster, primary, sluicetest.UniqueKey(t))
			promoted := func() error { return cluster.AwaitPromoted(replica) }
			run := underFailover(t, l, key, sluice.PerSecond(1_000_000), primary.Kill, promoted, 2500*time.Millisecond)
			recovery, failed, slow := run.recovery()
			t.Logf("promoted %s after the kill; %d calls, %d failed in the outage, whose last failure ended %s after the promotion, and %d while others were decided",
				run.promoted.Sub(run.killed).Round(time.Millisecond), len(run.calls), failed, recovery.Round(time.Millisecond), slow)
			require.Less(t, recovery, client.recoversWithin, "decisions succeed again soon after the promotion")
			require.Positive(t, run.succeededAfter(run.promoted.Add(recovery)), "and go on succeeding")
		})
	}
}

// allowedCalls returns the run's allowed calls as sluicetest.Calls, sorted
// by start.
func (r *failoverRun) allowedCalls() []builtins.Call {
	var out []builtins.Call
	for _, c := range r.calls {
		if c.err == nil && c.allowed {
			out = append(out, builtins.Call{Start: c.start.UnixNano(), End: c.end.UnixNano(), Allowed: true})
		}
	}
	slices.SortFunc(out, func(a, b builtins.Call) int { return cmp.Compare(a.Start, b.Start) })
	return out
}

// replicationLagAllowance is the over-admission a failover may add on
// loopback: the decisions of the replication lag, Rate x lag, with a lag
// of at most 50 ms.
const replicationLagAllowance = 50 * time.Millisecond

// TestSentinelFailover: kill -9 the primary of a Sentinel group (a
// replica, three sentinels) under load, through go-redis's FailoverClient
// and rueidis's sentinel client at their documented settings. Decisions
// succeed again within 1 s (rueidis) or 1.5 s (go-redis) of every
// sentinel's naming the promoted replica (the clients learn of it from one
// of them; a call that fails while others are decided is the load's, not
// the outage's: see recovery). That naming is awaited for as long as the
// sentinels show a failover under way, retries included
// ([redistest.SentinelGroup.AwaitFailover]). The bucket the
// promoted replica decides from is the replicated one: over every window
// from 10 ms to the whole run, the callers were admitted no more than
// Burst + Rate x window, plus Rate x the replication lag. The limit's
// burst is five times what refills during the failover, so a new primary
// that had lost the bucket would break the bound by hundreds.
func TestSentinelFailover(t *testing.T) {
	clients := []struct {
		name string
		// recoversWithin is how soon after the sentinels agree the
		// decisions succeed again. go-redis's pool, once PoolSize dials
		// have failed, stops dialling and probes the address once a
		// second, so it may take that second and a dial longer.
		recoversWithin time.Duration
		newStore       func(t *testing.T, sentinels []string) sluice.Store
	}{
		{"go-redis", time.Second + 200*time.Millisecond + 300*time.Millisecond, func(t *testing.T, sentinels []string) sluice.Store {
			c := redis.NewFailoverClient(&redis.FailoverOptions{
				MasterName: redistest.SentinelMaster, SentinelAddrs: sentinels,
				MaxRetries: -1, ContextTimeoutEnabled: true,
				DialTimeout: 200 * time.Millisecond, ReadTimeout: 50 * time.Millisecond, WriteTimeout: 50 * time.Millisecond,
			})
			t.Cleanup(func() { _ = c.Close() })
			s, err := goredisstore.New(c)
			require.NoError(t, err)
			return s
		}},
		{"rueidis", time.Second, func(t *testing.T, sentinels []string) sluice.Store {
			c, err := rueidis.NewClient(rueidis.ClientOption{
				InitAddress: sentinels, Sentinel: rueidis.SentinelOption{MasterSet: redistest.SentinelMaster},
				DisableCache: true, ConnWriteTimeout: 50 * time.Millisecond,
			})
			require.NoError(t, err)
			t.Cleanup(c.Close)
			s, err := rueidisstore.New(c)
			require.NoError(t, err)
			return s
		}},
	}
	limit := sluice.Limit{Rate: 200, Period: time.Second, Burst: 1000}
	for _, client := range clients {
		t.Run(client.name, func(t *testing.T) {
			group := redistest.StartSentinelGroup(t)
			l, err := tokenbucket.New(client.newStore(t, group.SentinelAddrs()))
			require.NoError(t, err)
			key := sluice.Key(sluicetest.UniqueKey(t))
			announced := func() error { return group.AwaitFailover(group.Replica) }
			run := underFailover(t, l, key, limit, group.Primary.Kill, announced, 2500*time.Millisecond)
			recovery, failed, slow := run.recovery()
			allowed := run.allowedCalls()
			excess, at := builtins.BucketExcess(allowed, limit, 10*time.Millisecond, 100*time.Millisecond,
				500*time.Millisecond, time.Second, 2*time.Second, 4*time.Second, builtins.Span(allowed)+time.Millisecond)
			t.Logf("every sentinel named the replica %s after the kill; %d calls, %d failed in the outage, whose last failure ended %s after that, "+
				"and %d while others were decided; %d allowed, worst window %+.1f over the bucket bound (at %s)",
				run.promoted.Sub(run.killed).Round(time.Millisecond), len(run.calls), failed, recovery.Round(time.Millisecond),
				slow, len(allowed), excess, at)
			require.Less(t, recovery, client.recoversWithin, "decisions succeed again soon after the sentinels agree on the new primary")
			require.Positive(t, run.succeededAfter(run.promoted.Add(recovery)), "and go on succeeding")
			require.LessOrEqual(t, excess, float64(limit.Rate)*replicationLagAllowance.Seconds(),
				"no window admits more than Burst + Rate x window + Rate x lag")
		})
	}
}

// TestMinReplicasToWriteStopsAnIsolatedPrimary: with min-replicas-to-write
// 1 and min-replicas-max-lag 1, a primary that stops hearing from its
// replica refuses every decision with NOREPLICAS within a few seconds,
// before the script writes anything (its replication offset does not
// move), and fallback decides meanwhile by its policy; once the replica is
// back, the store decides again. This is what bounds the decisions a
// failover can lose to about max-lag's worth.
func TestMinReplicasToWriteStopsAnIsolatedPrimary(t *testing.T) {
	args := []string{"--min-replicas-to-write", "1", "--min-replicas-max-lag", "1"}
	primary := redistest.StartRedis(t, args...)
	replica := redistest.StartReplica(t, primary, args...)
	client := redis.NewClient(&redis.Options{Addr: primary.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	gs, err := goredisstore.New(client)
	require.NoError(t, err)
	store, err := tokenbucket.New(gs)
	require.NoError(t, err)
	l, err := fallback.New(store, fallback.WithPolicy(fallback.Closed()), fallback.WithBreaker(fallback.Breaker{Failures: 1_000_000, Cooldown: time.Second, Probes: 1}),
		fallback.WithTimeout(time.Second)) // a loaded machine must not make the first call fall back
	require.NoError(t, err)
	// The primary accepts writes once it counts its replica as good (its
	// link up and its lag within max-lag): wait for that, however long the
	// machine's load makes it take.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info, err := client.Info(t.Context(), "replication").Result()
		require.NoError(t, err)
		if strings.Contains(info, "min_slaves_good_slaves:1") {
			break
		}
		require.True(t, time.Now().Before(deadline), "the primary never counted its replica as good:\n%s", info)
	}
	key := sluice.Key(sluicetest.UniqueKey(t))
	limit := sluice.PerSecond(1000)
	d, err := l.AllowN(t.Context(), key, limit, 1)
	require.NoError(t, err)
	require.Equal(t, sluice.SourceStore, d.Source)

	replica.Stall()
	stalled := time.Now()
	var refusedAfter time.Duration
	for refusedAfter == 0 {
		_, err := store.AllowN(t.Context(), key, limit, 1)
		if err != nil {
			require.ErrorContains(t, err, "NOREPLICAS")
			refusedAfter = time.Since(stalled)
		}
		require.Less(t, time.Since(stalled), 5*time.Second, "the primary refuses within 5 s")
		time.Sleep(10 * time.Millisecond)
	}
	offset := func() string {
		o, err := primary.Info("replication", "master_repl_offset")
		require.NoError(t, err)
		return o
	}
	before := offset()
	for range 20 {
		_, err := store.AllowN(t.Context(), key, limit, 1)
		require.ErrorContains(t, err, "NOREPLICAS")
		d, err := l.AllowN(t.Context(), key, limit, 1)
		require.NoError(t, err)
		require.Equal(t, sluice.SourceFallbackClosed, d.Source, "fallback decides by its policy")
	}
	require.Equal(t, before, offset(), "a refused decision writes nothing")

	replica.Resume()
	resumed := time.Now()
	for {
		d, err := l.AllowN(t.Context(), key, limit, 1)
		require.NoError(t, err)
		if d.Source == sluice.SourceStore {
			break
		}
		require.Less(t, time.Since(resumed), 5*time.Second, "the store decides again within 5 s of the replica's return")
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("refused with NOREPLICAS %s after the replica stalled; deciding again %s after it resumed",
		refusedAfter.Round(time.Millisecond), time.Since(resumed).Round(time.Millisecond))
}
