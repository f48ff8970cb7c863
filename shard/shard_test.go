package shard_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/shard"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memstore"
	"github.com/sluicehq/sluice/store/rueidisstore"
)

func TestMain(m *testing.M) { sluicetest.Main(m) }

func TestSharesAddUpExactly(t *testing.T) {
	for _, limit := range []sluice.Limit{
		{Rate: 100, Period: time.Second, Burst: 10},
		{Rate: 7, Period: time.Second, Burst: 5},
		{Rate: 1000, Period: time.Minute, Burst: 1001},
	} {
		for _, s := range []int{1, 2, 3, 4, 6, 64} {
			n := shard.Count(limit, s)
			require.LessOrEqual(t, n, s)
			var rate, burst int64
			for i := range n {
				share := shard.Share(limit, n, i)
				require.NoError(t, share.Validate())
				require.Equal(t, limit.Period, share.Period)
				rate += share.Rate
				burst += share.Burst
			}
			require.Equal(t, limit.Rate, rate, "%s in %d shares", limit, n)
			require.Equal(t, limit.Burst, burst, "%s in %d shares", limit, n)
		}
	}
}

func TestSubKeysSpreadOverTheSlotRange(t *testing.T) {
	for _, key := range []string{"tenant:42", "", "{", "}{#%", sluice.Key("a{b}")} {
		for _, s := range []int{1, 2, 3, 6, 64} {
			keys := shard.SubKeys(key, s)
			seen := map[string]bool{}
			for i, k := range keys {
				require.False(t, seen[k], "distinct sub-keys")
				seen[k] = true
				width := 16384 / s
				slot := sluice.HashSlot(k)
				require.GreaterOrEqual(t, slot, i*width+width/2-width/8, "%q share %d of %d", key, i, s)
				require.LessOrEqual(t, slot, i*width+width/2+width/8)
			}
		}
	}
	require.NotEqual(t, shard.SubKey("a#1", 0, 2), shard.SubKey("a", 0, 2), "keys containing # do not collide")
}

func TestShardedLimitHoldsAndColdKeysPassThrough(t *testing.T) {
	clock := sluicetest.NewFakeClock(sluicetest.Epoch)
	store := memstore.New()
	tb, err := tokenbucket.New(store, tokenbucket.WithClock(clock))
	require.NoError(t, err)
	l, err := shard.New(tb, shard.WithShards(4), shard.WithHotKeys("hot"))
	require.NoError(t, err)
	limit := sluice.Limit{Rate: 100, Period: time.Second, Burst: 40}
	allowed := 0
	for range 1000 {
		d, err := l.AllowN(t.Context(), "hot", limit, 1)
		require.NoError(t, err)
		if d.Allowed {
			allowed++
		}
	}
	require.LessOrEqual(t, allowed, 40, "together, the shares allow at most the burst")
	require.GreaterOrEqual(t, allowed, 36, "two tries per request leave little unused")

	d, err := l.AllowN(t.Context(), "cold", limit, 1)
	require.NoError(t, err)
	require.Equal(t, limit, d.Limit, "a cold key is decided whole")
	_, found := store.Value("cold" + tokenbucket.KeySuffix)
	require.True(t, found, "under its own key")

	_, err = l.AllowN(t.Context(), "hot", limit, 11)
	require.ErrorIs(t, err, sluice.ErrCostExceedsBurst, "a cost above one share's burst")
}

func TestBadInput(t *testing.T) {
	_, err := shard.New(nil)
	require.Error(t, err)
	tb, err := tokenbucket.New(memstore.New())
	require.NoError(t, err)
	for _, o := range []shard.Option{nil, shard.WithShards(0), shard.WithShards(shard.MaxShards + 1), shard.WithPredicate(nil)} {
		_, err := shard.New(tb, o)
		require.Error(t, err)
	}
	l, err := shard.New(tb)
	require.NoError(t, err)
	_, err = l.AllowN(t.Context(), "", sluice.PerSecond(10), 1)
	require.ErrorIs(t, err, sluice.ErrInvalidKey)
	_, err = l.AllowN(t.Context(), "k", sluice.Limit{}, 1)
	require.ErrorIs(t, err, sluice.ErrInvalidLimit)
}

// TestOnCluster: on a real 3-primary Redis Cluster, the S sub-keys of a
// key land on min(S, 3) different primaries; under concurrent load the
// shares together admit at most Burst + Rate × T; and under skewed load
// the rate of requests denied while another share still had room is
// measured (and logged for docs/scaling.md).
func TestOnCluster(t *testing.T) {
	cluster := sluicetest.StartCluster(t, 3)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cluster.Addrs(), DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(client.Close)
	store := rueidisstore.New(client)

	t.Run("sub-keys land on min(S, primaries) nodes", func(t *testing.T) {
		for s := 1; s <= 6; s++ {
			for _, key := range []string{"tenant:42", sluice.Key("tenant:{7}"), ""} {
				nodes := map[string]bool{}
				for _, k := range shard.SubKeys(key, s) {
					slot, err := client.Do(t.Context(), client.B().ClusterKeyslot().Key(k).Build()).AsInt64()
					require.NoError(t, err)
					require.Equal(t, sluice.HashSlot(k), int(slot))
					nodes[cluster.NodeForSlot(int(slot)).Addr()] = true
				}
				require.Len(t, nodes, min(s, 3), "key %q in %d shares", key, s)
			}
		}
	})

	tb, err := tokenbucket.New(store)
	require.NoError(t, err)

	t.Run("the shares admit at most Burst + Rate × T", func(t *testing.T) {
		l, err := shard.New(tb, shard.WithShards(3))
		require.NoError(t, err)
		limit := sluice.Limit{Rate: 300, Period: time.Second, Burst: 60}
		key := sluicetest.UniqueKey(t)
		var allowed atomic.Int64
		ctx, stop := context.WithTimeout(t.Context(), 2*time.Second)
		defer stop()
		start := time.Now()
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				for ctx.Err() == nil {
					d, err := l.AllowN(context.Background(), key, limit, 1)
					if err != nil {
						t.Error(err)
						return
					}
					if d.Allowed {
						allowed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		bound := float64(limit.Burst) + float64(limit.Rate)*elapsed.Seconds()
		t.Logf("%d allowed in %s, bound %.0f (%.1f%%)", allowed.Load(), elapsed, bound, 100*float64(allowed.Load())/bound)
		require.LessOrEqual(t, float64(allowed.Load()), bound)
		require.GreaterOrEqual(t, float64(allowed.Load()), 0.9*bound, "the shares together admit close to the limit")
	})

	t.Run("denied while another share had room, under skewed load", func(t *testing.T) {
		// Skew: requests of mixed cost (1 to 8) from bursts of clients;
		// after each final denial, look at every share.
		for _, s := range []int{2, 3, 6} {
			l, err := shard.New(tb, shard.WithShards(s))
			require.NoError(t, err)
			limit := sluice.Limit{Rate: 600, Period: time.Second, Burst: 120}
			key := sluicetest.UniqueKey(t) + strconv.Itoa(s)
			var denied, deniedWithRoom, total int
			deadline := time.Now().Add(time.Second)
			for i := 0; time.Now().Before(deadline); i++ {
				n := int64(1 + i%8)
				d, err := l.AllowN(t.Context(), key, limit, n)
				require.NoError(t, err)
				total++
				if d.Allowed {
					continue
				}
				denied++
				for j, k := range shard.SubKeys(key, s) {
					p, err := tb.AllowN(t.Context(), k, shard.Share(limit, s, j), 0)
					require.NoError(t, err)
					if p.Remaining >= n {
						deniedWithRoom++
						break
					}
				}
			}
			require.Positive(t, denied)
			t.Logf("S=%d: %d requests, %d denied, %d of them (%.1f%%) while another share had room",
				s, total, denied, deniedWithRoom, 100*float64(deniedWithRoom)/float64(denied))
		}
	})
}
