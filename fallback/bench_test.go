package fallback_test

import (
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/rueidisstore"
)

// BenchmarkOverhead: the decorator's cost on the healthy path, next to the
// undecorated limiter, on the in-process store (where the decorator's own
// cost is most visible) and on a real redis-server through rueidis.
//
//	go test -run '^$' -bench BenchmarkOverhead -benchtime 2s -count 3 ./fallback/
func BenchmarkOverhead(b *testing.B) {
	limit := sluice.PerSecond(1_000_000).WithBurst(1_000_000_000)
	stores := map[string]func(b *testing.B) sluice.Store{
		"memstore": func(b *testing.B) sluice.Store { return newMemStore(b) },
		"redis-rueidis": func(b *testing.B) sluice.Store {
			server := redistest.StartRedis(b)
			c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{server.Addr()}, DisableCache: true})
			require.NoError(b, err)
			b.Cleanup(c.Close)
			s, err := rueidisstore.New(c)
			require.NoError(b, err)
			return s
		},
	}
	for _, storeName := range []string{"memstore", "redis-rueidis"} {
		store := stores[storeName](b)
		tb, err := tokenbucket.New(store)
		require.NoError(b, err)
		decorated, err := fallback.New(tb)
		require.NoError(b, err)
		for _, c := range []struct {
			name string
			l    sluice.Limiter
		}{{"undecorated", tb}, {"fallback", decorated}} {
			b.Run(storeName+"/"+c.name, func(b *testing.B) {
				b.ReportAllocs()
				ctx := b.Context()
				for b.Loop() {
					if _, err := c.l.AllowN(ctx, "bench", limit, 1); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
