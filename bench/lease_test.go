package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/coalesce"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/builtins"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/memstore"
	"github.com/sluicehq/sluice/store/rueidisstore"
)

func TestMain(m *testing.M) { builtins.Main(m) }

// newMemStore returns memstore.New(opts...), failing t on an error.
func newMemStore(t testing.TB, opts ...memstore.Option) *memstore.Store {
	t.Helper()
	s, err := memstore.New(opts...)
	require.NoError(t, err)
	return s
}

// BenchmarkLease: decisions per second and Redis calls per decision at 64
// goroutines, for the token bucket on a real redis-server (rueidis) without
// a lease and with leases of B = 10, 100 and 1000, next to in-process
// golang.org/x/time/rate limiters (the no-network ceiling), on one hot key
// and on 10,000 keys. The limit is large enough that every request is
// allowed. The unleased limiter and B = 100 are also measured behind
// coalesce (lease over coalesce over the token bucket), whose batches count
// as one Redis call each; B = 100 is also measured with the token bucket on
// memstore, in process, which shows the lease's own ceiling without any
// Redis. x/time/rate is measured twice: with its limiters found by key in
// a sync.Map, as a per-key limiter must find them (and as the lease finds
// its leases), and, as a floor, indexed directly by number.
//
// Every variant first decides one request per key, untimed, as a running
// service's limiters are warm: for a lease that is one round trip per key
// (the "warm-ms" metric), which is not a decision rate. The timed part is
// the steady state, and redis-calls/decision counts only its calls.
//
//	cd bench && go test -run '^$' -bench BenchmarkLease -benchtime 2s -count 3 .
func BenchmarkLease(b *testing.B) {
	server := redistest.StartRedis(b)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{server.Addr()}, DisableCache: true})
	require.NoError(b, err)
	b.Cleanup(client.Close)
	limit := sluice.PerSecond(1_000_000).WithBurst(1_000_000_000)

	for _, keys := range []int{1, 10_000} {
		names := make([]string, keys)
		for i := range names {
			names[i] = sluice.Key(fmt.Sprintf("tenant%06d", i))
		}
		b.Run(fmt.Sprintf("keys=%d/x-time-rate-by-key", keys), func(b *testing.B) {
			var limiters sync.Map
			decide := func(i int) bool {
				name := names[i%keys]
				v, ok := limiters.Load(name)
				if !ok {
					v, _ = limiters.LoadOrStore(name, rate.NewLimiter(rate.Limit(limit.Rate), int(limit.Burst)))
				}
				return v.(*rate.Limiter).Allow()
			}
			runParallel(b, keys, decide, nil)
		})
		b.Run(fmt.Sprintf("keys=%d/x-time-rate-by-index", keys), func(b *testing.B) {
			limiters := make([]*rate.Limiter, keys)
			for i := range limiters {
				limiters[i] = rate.NewLimiter(rate.Limit(limit.Rate), int(limit.Burst))
			}
			decide := func(i int) bool { return limiters[i%keys].Allow() }
			runParallel(b, keys, decide, nil)
		})
		for _, v := range []struct {
			batch    int64
			coalesce bool
			inMemory bool // the token bucket on memstore: the lease's own ceiling, no Redis
		}{{0, false, false}, {0, true, false}, {10, false, false}, {100, false, false}, {100, true, false}, {1000, false, false}, {100, false, true}} {
			name := fmt.Sprintf("keys=%d/no-lease", keys)
			if v.batch > 0 {
				name = fmt.Sprintf("keys=%d/lease-B=%d", keys, v.batch)
			}
			if v.coalesce {
				name += "+coalesce"
			}
			if v.inMemory {
				name += "-on-memstore"
			}
			b.Run(name, func(b *testing.B) {
				var backend sluice.Store
				if v.inMemory {
					backend = newMemStore(b)
				} else {
					rs, err := rueidisstore.New(client)
					require.NoError(b, err)
					backend = rs
				}
				store := &sluicetest.CountingStore{Store: backend}
				tb, err := tokenbucket.New(store)
				require.NoError(b, err)
				var shared sluice.Limiter = tb
				if v.coalesce {
					shared, err = coalesce.New(tb)
					require.NoError(b, err)
				}
				l := sluice.Limiter(shared)
				if v.batch > 0 {
					leased, err := lease.New(shared, lease.WithSize(v.batch))
					require.NoError(b, err)
					defer leased.Close()
					l = leased
				}
				ctx := context.Background()
				decide := func(i int) bool {
					d, err := l.AllowN(ctx, names[i%keys], limit, 1)
					return err == nil && d.Allowed
				}
				runParallel(b, keys, decide, func() { store.Runs.Store(0) })
				b.ReportMetric(float64(store.Runs.Load())/float64(b.N), "redis-calls/decision")
			})
		}
	}
}

// warm decides one request for each of keys from 64 goroutines and
// returns how long that took; it fails the benchmark if a decision is a
// denial or an error.
func warm(b *testing.B, keys int, decide func(i int) bool) time.Duration {
	start := time.Now()
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < keys; i = int(next.Add(1)) - 1 {
				if !decide(i) {
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() {
		b.Fatal("a warm-up decision was denied or failed")
	}
	return time.Since(start)
}

// runParallel first decides one request per key, untimed (see warm), then
// calls warmed (if not nil), then runs decide from 64 goroutines and
// reports decisions/s and the warm-up's duration; it fails the benchmark
// if a decision is a denial or an error.
func runParallel(b *testing.B, keys int, decide func(i int) bool, warmed func()) {
	b.ReportAllocs()
	warmup := warm(b, keys, decide)
	if warmed != nil {
		warmed()
	}
	b.SetParallelism(32) // 64 goroutines on 2 cores
	b.ResetTimer()
	var next atomic.Int64
	var failed atomic.Bool
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(7919))
		for pb.Next() {
			if !decide(i) {
				failed.Store(true)
			}
			i++
		}
	})
	b.StopTimer() // what follows (closing a lease, refunding) is not a decision
	if failed.Load() {
		b.Fatal("a decision was denied or failed")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric(float64(warmup.Microseconds())/1000, "warm-ms")
}
