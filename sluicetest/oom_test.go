package sluicetest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/multilimit"
	"github.com/sluicehq/sluice/sluicetest/builtins"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/goredisstore"
)

// TestEveryScriptFailsCleanlyWhenRedisIsOutOfMemory: over maxmemory with
// noeviction, every script that would add to a key fails with Redis's OOM
// error before it writes anything: each algorithm's decision (the sliding
// log's included, whose cleanup used to run first and let its ZADD
// through), batches, multi-limit checks and leases. The keys are left as
// they were.
func TestEveryScriptFailsCleanlyWhenRedisIsOutOfMemory(t *testing.T) {
	server := redistest.StartRedis(t, "--maxmemory-policy", "noeviction")
	client := redis.NewClient(&redis.Options{Addr: server.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	store, err := goredisstore.New(client)
	require.NoError(t, err)
	ctx := t.Context()
	limit := sluice.Limit{Rate: 1000, Period: time.Hour, Burst: 1000}

	type subject struct {
		name string
		call func() error
	}
	var subjects []subject
	for _, alg := range builtins.Algorithms {
		l, err := alg.New(store, nil)
		require.NoError(t, err)
		key := sluice.Key("oom", alg.Name)
		batchKey := sluice.Key("oom", alg.Name+"-batch")
		// State first, while there is memory: a key with a refund to make
		// and room left, so that a batch may mix a refund and an admission.
		for _, k := range []string{key, batchKey} {
			_, err = l.AllowN(ctx, k, limit, 2)
			require.NoError(t, err)
		}
		subjects = append(subjects,
			subject{alg.Name, func() error { _, err := l.AllowN(ctx, key, limit, 100); return err }},
			subject{alg.Name + " batch", func() error {
				results, err := l.AllowBatch(ctx, []sluice.Request{{Key: batchKey, Limit: limit, N: 1}, {Key: batchKey, Limit: limit, N: 50}})
				if err != nil {
					return err
				}
				for _, r := range results {
					if r.Err == nil {
						return fmt.Errorf("a request was decided: %+v", r.Decision)
					}
				}
				return results[0].Err
			}},
		)
	}
	// The token bucket's and GCRA's batch of a key each (one MGET, then
	// each key's write): its first write refused, whether it keeps the
	// key's expiry (SETRANGE, on a state 1,000 s ahead that a microsecond
	// does not move to another second) or sets a new one (MSET).
	fine := sluice.Limit{Rate: 1_000_000, Period: time.Second, Burst: 1_000_000_000_000}
	for _, alg := range builtins.Algorithms {
		if alg.Name != "tokenbucket" && alg.Name != "gcra" {
			continue
		}
		l, err := alg.New(store, nil)
		require.NoError(t, err)
		for _, kept := range []bool{true, false} {
			lim, name := limit, alg.Name+" batch of a key each, a new expiry"
			if kept {
				lim, name = fine, alg.Name+" batch of a key each, the expiry kept"
			}
			reqs := []sluice.Request{{Key: sluice.Key("oom", name, "a"), Limit: lim, N: 1}, {Key: sluice.Key("oom", name, "b"), Limit: lim, N: 1}}
			for _, r := range reqs {
				n := int64(2)
				if kept {
					n = 1_000_000_000
				}
				_, err = l.AllowN(ctx, r.Key, lim, n)
				require.NoError(t, err)
			}
			subjects = append(subjects, subject{name, func() error {
				_, err := l.AllowBatch(ctx, reqs)
				return err
			}})
		}
	}
	ml, err := multilimit.New(store)
	require.NoError(t, err)
	mlKeys := []string{sluice.Key("oom", "ml-tb"), sluice.Key("oom", "ml-log")}
	checks := []multilimit.Check{{Key: mlKeys[0], Limit: limit, Algorithm: multilimit.TokenBucket}, {Key: mlKeys[1], Limit: limit, Algorithm: multilimit.SlidingLog}}
	_, err = ml.AllowN(ctx, checks, 1)
	require.NoError(t, err)
	subjects = append(subjects, subject{"multilimit", func() error { _, err := ml.AllowN(ctx, checks, 10); return err }})
	tb, err := tokenbucket.New(store)
	require.NoError(t, err)
	leaseKey := sluice.Key("oom", "lease")
	_, err = tb.Lease(ctx, ext.LeaseRequest{Key: leaseKey, Limit: limit, Holder: 1, Cost: 1, Extra: 10, Hold: time.Minute})
	require.NoError(t, err)
	subjects = append(subjects,
		subject{"lease", func() error {
			_, err := tb.Lease(ctx, ext.LeaseRequest{Key: leaseKey, Limit: limit, Holder: 2, Cost: 1, Extra: 10, Hold: time.Minute})
			return err
		}},
		subject{"lease batch", func() error {
			results, err := tb.LeaseBatch(ctx, []ext.LeaseRequest{{Key: leaseKey, Limit: limit, Holder: 3, Cost: 1, Extra: 10, Hold: time.Minute}})
			if err != nil {
				return err
			}
			return results[0].Err
		}})

	// Over maxmemory for good: some data, then a limit well below it.
	require.NoError(t, client.Set(ctx, "filler", strings.Repeat("x", 1<<20), 0).Err())
	used, err := server.Info("memory", "used_memory")
	require.NoError(t, err)
	var usedBytes int64
	_, err = fmt.Sscan(used, &usedBytes)
	require.NoError(t, err)
	_, err = server.Do("CONFIG", "SET", "maxmemory", fmt.Sprint(usedBytes/2))
	require.NoError(t, err)
	require.ErrorContains(t, client.Set(ctx, "one-more", "x", 0).Err(), "OOM")
	snapshot := func() map[string]string {
		keys, err := client.Keys(ctx, "rl:*").Result()
		require.NoError(t, err)
		out := map[string]string{}
		for _, k := range keys {
			v, err := client.Dump(ctx, k).Result()
			require.NoError(t, err)
			out[k] = v
		}
		return out
	}
	for _, s := range subjects {
		before := snapshot()
		err := s.call()
		require.ErrorContains(t, err, "OOM", "%s: refused for memory", s.name)
		require.Equal(t, before, snapshot(), "%s: nothing written", s.name)
	}
}
