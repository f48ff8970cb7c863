package sluicetest_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/sluicetest/builtins"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/goredisstore"
	"github.com/sluicehq/sluice/store/rueidisstore"
)

// clusterIDs returns n tenant IDs as users send them: the awkward ones
// (braces, empty, 1 KiB, binary bytes) and random text full of braces.
func clusterIDs(n int) []string {
	ids := []string{"", "{", "}", "{}", "}{", "{{}}", "a{b}c", "{tenant}", strings.Repeat("x", 1024),
		strings.Repeat("{", 1024), "\x00\xff\xfe{\x01}", "tenant:42", "%7B", "%"}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("ab{}:%\x00\xff 9")
	for len(ids) < n {
		b := make([]byte, rng.IntN(24))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		ids = append(ids, string(b))
	}
	return ids
}

// TestClusterKeySlots: 100,000 tenant IDs, including awkward ones, through
// a real 3-primary Redis Cluster: every key Sluice builds for a tenant
// (sluice.Key plus each algorithm's suffix) is in the slot of the tenant's
// hash tag, as CLUSTER KEYSLOT says and as ext.HashSlot computes, and a
// decision on each through both cluster clients sees no CROSSSLOT or any
// other error.
func TestClusterKeySlots(t *testing.T) {
	cluster := redistest.SharedCluster(t)
	ids := clusterIDs(100_000)

	keys := make([][]string, len(ids)) // per tenant: its keys
	for i, id := range ids {
		for _, alg := range builtins.Algorithms {
			keys[i] = append(keys[i], sluice.Key(id, "route", "orders")+alg.KeySuffix)
		}
		keys[i] = append(keys[i], sluice.Key(id))
	}

	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cluster.Addrs(), DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	// CLUSTER KEYSLOT for every key, pipelined.
	var cmds rueidis.Commands
	for _, ks := range keys {
		for _, k := range ks {
			cmds = append(cmds, rc.B().ClusterKeyslot().Key(k).Build())
		}
	}
	results := rc.DoMulti(t.Context(), cmds...)
	j := 0
	for i, ks := range keys {
		want := ext.HashSlot(sluice.Key(ids[i]))
		for _, k := range ks {
			slot, err := results[j].AsInt64()
			j++
			require.NoError(t, err)
			require.Equal(t, want, int(slot), "tenant %q, key %q", ids[i], k)
			require.Equal(t, want, ext.HashSlot(k), "ext.HashSlot agrees with CLUSTER KEYSLOT")
		}
	}

	gc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), MaxRetries: -1, PoolSize: 32})
	t.Cleanup(func() { _ = gc.Close() })
	gs, err := goredisstore.New(gc)
	require.NoError(t, err)
	rs, err := rueidisstore.New(rc)
	require.NoError(t, err)
	for name, store := range map[string]sluice.Store{"go-redis": gs, "rueidis": rs} {
		t.Run(name, func(t *testing.T) {
			l, err := tokenbucket.New(store)
			require.NoError(t, err)
			limit := sluice.PerSecond(10)
			var wg sync.WaitGroup
			errs := make(chan error, 1)
			next := make(chan string)
			for range 32 {
				wg.Go(func() {
					for id := range next {
						if _, err := l.AllowN(context.Background(), sluice.Key(id, name), limit, 1); err != nil {
							select {
							case errs <- err:
							default:
							}
						}
					}
				})
			}
			for _, id := range ids {
				next <- id
			}
			close(next)
			wg.Wait()
			close(errs)
			require.NoError(t, <-errs)
		})
	}
	// The awkward IDs did land on every primary's slots, not all in one.
	nodes := map[string]bool{}
	for _, id := range ids {
		nodes[cluster.NodeForSlot(ext.HashSlot(sluice.Key(id))).Addr()] = true
	}
	require.Len(t, nodes, len(cluster.Nodes))
}
