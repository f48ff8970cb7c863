package shard_test

import (
	"fmt"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/shard"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/rueidisstore"
)

// BenchmarkHotTenant: one hot key on a real 3-primary Redis Cluster,
// 64 goroutines through rueidis, split into S = 1, 3 and 6 shares. The limit
// is large enough that every request is allowed.
//
//	go test -run '^$' -bench BenchmarkHotTenant -benchtime 3s -count 3 ./shard/
func BenchmarkHotTenant(b *testing.B) {
	cluster := redistest.StartCluster(b, 3)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cluster.Addrs(), DisableCache: true})
	require.NoError(b, err)
	b.Cleanup(client.Close)
	store, err := rueidisstore.New(client)
	require.NoError(b, err)
	tb, err := tokenbucket.New(store)
	require.NoError(b, err)
	// 6,000/s splits into shares the token bucket accepts (1%-exact
	// intervals); the burst is large enough that every request is allowed.
	limit := sluice.PerSecond(6000).WithBurst(1_000_000_000_000)
	for _, s := range []int{1, 3, 6} {
		l, err := shard.New(tb, shard.WithShards(s))
		require.NoError(b, err)
		b.Run(fmt.Sprintf("S=%d", s), func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(32) // 64 goroutines on 2 cores
			key := fmt.Sprintf("hot-tenant-%d", s)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := l.AllowN(b.Context(), key, limit, 1); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}
