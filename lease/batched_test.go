package lease_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/coalesce"
	"github.com/sluicehq/sluice/denycache"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/sluiceotel"
)

// gatedStore holds every script call until gate closes, and counts the
// calls and the most keys one call carried.
type gatedStore struct {
	sluice.Store
	gate    chan struct{}
	runs    atomic.Int64
	maxKeys atomic.Int64
}

func (s *gatedStore) Run(ctx context.Context, script *sluice.Script, keys []string, args []int64) ([]int64, error) {
	<-s.gate
	s.runs.Add(1)
	for {
		m := s.maxKeys.Load()
		if int64(len(keys)) <= m || s.maxKeys.CompareAndSwap(m, int64(len(keys))) {
			break
		}
	}
	return s.Store.Run(ctx, script, keys, args)
}

// TestLeasesStayBatchedThroughDecorators: a lease over fallback, sluiceotel,
// denycache or coalesce (over the token bucket) still sends the lease
// requests of many keys in one script call, and Close their releases, as
// it does over the bucket itself: each decorator forwards the batched
// lease path.
func TestLeasesStayBatchedThroughDecorators(t *testing.T) {
	const keys = 20
	for _, c := range []struct {
		name string
		wrap func(sluice.Limiter) (sluice.Limiter, error)
	}{
		{"bucket", func(l sluice.Limiter) (sluice.Limiter, error) { return l, nil }},
		{"fallback", func(l sluice.Limiter) (sluice.Limiter, error) {
			return fallback.New(l, fallback.WithTimeout(time.Hour))
		}},
		{"sluiceotel", func(l sluice.Limiter) (sluice.Limiter, error) { return sluiceotel.New(l) }},
		{"denycache", func(l sluice.Limiter) (sluice.Limiter, error) { return denycache.New(l) }},
		{"coalesce", func(l sluice.Limiter) (sluice.Limiter, error) { return coalesce.New(l) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := &gatedStore{Store: newMemStore(t), gate: make(chan struct{})}
				tb, err := tokenbucket.New(store)
				require.NoError(t, err)
				next, err := c.wrap(tb)
				require.NoError(t, err)
				l, err := lease.New(next)
				require.NoError(t, err)
				defer func() { require.NoError(t, l.Close()) }()

				var wg sync.WaitGroup
				for i := range keys {
					wg.Go(func() {
						d, err := l.AllowN(t.Context(), sluice.Key(fmt.Sprint("tenant", i)), sluice.PerSecond(1000), 1)
						require.NoError(t, err)
						require.True(t, d.Allowed)
					})
				}
				synctest.Wait() // every caller waits for its lease, every sender at the gate
				close(store.gate)
				wg.Wait()
				require.Less(t, store.runs.Load(), int64(keys), "some script call carried several keys' leases")
				require.Greater(t, store.maxKeys.Load(), int64(2), "a lease is a state key and a ledger key")
				before := store.runs.Load()
				require.NoError(t, l.Close())
				require.EqualValues(t, 1, store.runs.Load()-before, "the releases of every key in one script call")
				require.EqualValues(t, 2*keys, store.maxKeys.Load(), "and every key's in it")
			})
		})
	}
}
