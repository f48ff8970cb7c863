package multilimit_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/fixedwindow"
	"github.com/sluicehq/sluice/algorithms/slidinglog"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/multilimit"
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

var (
	perSecond = sluice.Limit{Rate: 5, Period: time.Second, Burst: 5}
	perMinute = sluice.Limit{Rate: 8, Period: time.Minute, Burst: 8}
)

func checks(tenant string) []multilimit.Check {
	return []multilimit.Check{
		{Key: sluice.Key(tenant, "per-second"), Limit: perSecond},
		{Key: sluice.Key(tenant, "per-minute"), Limit: perMinute},
	}
}

func tiers() map[string]func(t *testing.T) sluicetest.Tier {
	return map[string]func(t *testing.T) sluicetest.Tier{
		"memstore":  sluicetest.MemTier,
		"miniredis": redistest.MiniredisTier,
		"redis/go-redis": func(t *testing.T) sluicetest.Tier {
			return redistest.GoRedisTier(t, redistest.SharedRedis(t))
		},
		"redis/rueidis": func(t *testing.T) sluicetest.Tier {
			return redistest.RueidisTier(t, redistest.SharedRedis(t))
		},
		"redis/decimal": func(t *testing.T) sluicetest.Tier { // every argument in decimal, not hex
			return redistest.DecimalTier(t, redistest.SharedRedis(t))
		},
		"cluster/go-redis": func(t *testing.T) sluicetest.Tier {
			return redistest.GoRedisClusterTier(t, redistest.SharedCluster(t))
		},
		"cluster/rueidis": func(t *testing.T) sluicetest.Tier {
			return redistest.RueidisClusterTier(t, redistest.SharedCluster(t))
		},
	}
}

// TestAllOrNothing runs the same steps on every tier: a denial by one limit
// consumes from none, and every decision equals the Go model's.
func TestAllOrNothing(t *testing.T) {
	for name, newTier := range tiers() {
		t.Run(name, func(t *testing.T) {
			tier := newTier(t)
			clock := sluicetest.NewFakeClock(sluicetest.Epoch)
			l, err := multilimit.New(tier.Store, multilimit.WithClock(clock))
			require.NoError(t, err)
			tenant := sluicetest.UniqueKey(t)
			cs := checks(tenant)
			for i := range 5 {
				d, err := l.AllowN(t.Context(), cs, 1)
				require.NoError(t, err)
				require.True(t, d.Allowed)
				require.Equal(t, -1, d.Denied)
				require.Equal(t, int64(4-i), d.Limits[0].Remaining)
				require.Equal(t, int64(7-i), d.Limits[1].Remaining)
			}
			d, err := l.AllowN(t.Context(), cs, 1)
			require.NoError(t, err)
			require.False(t, d.Allowed)
			require.Equal(t, 0, d.Denied, "the per-second limit denied")
			require.Equal(t, 200*time.Millisecond, d.RetryAfter)
			require.Equal(t, int64(3), d.Limits[1].Remaining, "the per-minute limit was not consumed")

			// Retry exactly at RetryAfter: allowed. Then the minute runs out.
			clock.Advance(d.RetryAfter)
			d, err = l.AllowN(t.Context(), cs, 1)
			require.NoError(t, err)
			require.True(t, d.Allowed)
			clock.Advance(time.Second)
			d, err = l.AllowN(t.Context(), cs, 3)
			require.NoError(t, err)
			require.False(t, d.Allowed)
			require.Equal(t, 1, d.Denied, "the per-minute limit denied a cost of 3 with 2 left")
			require.Equal(t, int64(2), d.Limits[1].Remaining)
			require.Equal(t, int64(5), d.Limits[0].Remaining, "the per-second limit was not consumed")

			// The buckets are the token bucket's own.
			tb, err := tokenbucket.New(tier.Store, tokenbucket.WithClock(clock))
			require.NoError(t, err)
			p, err := tb.AllowN(t.Context(), cs[1].Key, perMinute, 0)
			require.NoError(t, err)
			require.Equal(t, int64(2), p.Remaining)

			// Random sequences against the model.
			model, err := multilimit.New(newMemStore(t), multilimit.WithClock(clock))
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
			other := checks(tenant + ":random")
			for i := range 200 {
				clock.Advance(time.Duration(rng.Int64N(int64(300*time.Millisecond))) - 10*time.Millisecond)
				n := rng.Int64N(4)
				got, err := l.AllowN(t.Context(), other, n)
				require.NoError(t, err)
				want, err := model.AllowN(t.Context(), other, n)
				require.NoError(t, err)
				require.Equal(t, want, got, "step %d", i)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	l, err := multilimit.New(newMemStore(t))
	require.NoError(t, err)
	_, err = l.AllowN(t.Context(), nil, 1)
	require.ErrorIs(t, err, sluice.ErrInvalidLimit)
	_, err = l.AllowN(t.Context(), []multilimit.Check{{Key: sluice.Key("a"), Limit: perSecond}, {Key: sluice.Key("b"), Limit: perSecond}}, 1)
	require.ErrorIs(t, err, multilimit.ErrCrossSlot)
	_, err = l.AllowN(t.Context(), []multilimit.Check{{Key: "", Limit: perSecond}}, 1)
	require.ErrorIs(t, err, sluice.ErrInvalidKey)
	_, err = l.AllowN(t.Context(), checks("t"), 6)
	require.ErrorIs(t, err, sluice.ErrCostExceedsBurst)
	_, err = l.AllowN(t.Context(), []multilimit.Check{{Key: "k", Limit: sluice.Limit{}}}, 1)
	require.ErrorIs(t, err, sluice.ErrInvalidLimit)
	_, err = multilimit.New(nil)
	require.Error(t, err)
	_, err = multilimit.New(newMemStore(t), multilimit.WithClock(nil))
	require.ErrorContains(t, err, "multilimit: WithClock(nil)")
	_, err = multilimit.New(newMemStore(t), nil)
	require.ErrorContains(t, err, "multilimit: option 0 is nil")
}

// TestNoPartialConsumption: 32 goroutines on a real redis-server check a
// per-second limit and a limit that does not refill; afterwards the second
// bucket has given exactly what was admitted: no request consumed from one
// limit while the other denied it.
func TestNoPartialConsumption(t *testing.T) {
	server := redistest.SharedRedis(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{server.Addr()}, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(client.Close)
	store, err := rueidisstore.New(client)
	require.NoError(t, err)
	l, err := multilimit.New(store)
	require.NoError(t, err)
	tenant := sluicetest.UniqueKey(t)
	noRefill := sluice.Limit{Rate: 1, Period: 24 * time.Hour, Burst: 400} // no refill to speak of
	cs := []multilimit.Check{
		{Key: sluice.Key(tenant, "per-second"), Limit: sluice.Limit{Rate: 200, Period: time.Second, Burst: 20}},
		{Key: sluice.Key(tenant, "total"), Limit: noRefill},
	}
	var admitted, deniedBySecond, deniedByTotal atomic.Int64
	ctx, stop := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer stop()
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for ctx.Err() == nil {
				d, err := l.AllowN(context.Background(), cs, 1)
				if err != nil {
					t.Error(err)
					return
				}
				switch {
				case d.Allowed:
					admitted.Add(1)
				case d.Denied == 0:
					deniedBySecond.Add(1)
				default:
					deniedByTotal.Add(1)
				}
			}
		})
	}
	wg.Wait()
	tb, err := tokenbucket.New(store)
	require.NoError(t, err)
	p, err := tb.AllowN(t.Context(), cs[1].Key, noRefill, 0)
	require.NoError(t, err)
	t.Logf("admitted %d, denied by the per-second limit %d, by the total %d; the total bucket has %d left",
		admitted.Load(), deniedBySecond.Load(), deniedByTotal.Load(), p.Remaining)
	require.Positive(t, deniedBySecond.Load(), "the per-second limit did deny")
	require.Equal(t, noRefill.Burst-admitted.Load(), p.Remaining, "the total bucket gave exactly what was admitted")
}

// BenchmarkMultiLimit: 2 and 3 token-bucket limits, and 3 limits of three
// algorithms (token bucket, fixed window, sliding log), in one call against
// separate calls of each algorithm's own limiter, on a real redis-server
// through rueidis, one goroutine.
//
//	go test -run '^$' -bench BenchmarkMultiLimit -benchtime 2s -count 3 ./multilimit/
func BenchmarkMultiLimit(b *testing.B) {
	server := redistest.StartRedis(b)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{server.Addr()}, DisableCache: true})
	require.NoError(b, err)
	b.Cleanup(client.Close)
	store, err := rueidisstore.New(client)
	require.NoError(b, err)
	l, err := multilimit.New(store)
	require.NoError(b, err)
	tb, err := tokenbucket.New(store)
	require.NoError(b, err)
	fw, err := fixedwindow.New(store)
	require.NoError(b, err)
	sl, err := slidinglog.New(store)
	require.NoError(b, err)
	own := map[multilimit.Algorithm]sluice.Limiter{multilimit.TokenBucket: tb, multilimit.FixedWindow: fw, multilimit.SlidingLog: sl}
	big := sluice.Limit{Rate: 1_000_000, Period: time.Second, Burst: 1_000_000_000}
	// The sliding log keeps one member per request of the last period:
	// 10,000 per 10 ms keeps the set small and never denies here.
	log := sluice.Limit{Rate: 10_000, Period: 10 * time.Millisecond, Burst: 10_000}
	cases := map[string][]multilimit.Check{
		"tokenbucket-x2": {{Key: sluice.Key("bench", "a"), Limit: big}, {Key: sluice.Key("bench", "b"), Limit: big}},
		"tokenbucket-x3": {{Key: sluice.Key("bench", "a"), Limit: big}, {Key: sluice.Key("bench", "b"), Limit: big}, {Key: sluice.Key("bench", "c"), Limit: big}},
		"mixed-x3": {
			{Key: sluice.Key("bench", "m1"), Limit: big, Algorithm: multilimit.TokenBucket},
			{Key: sluice.Key("bench", "m2"), Limit: big, Algorithm: multilimit.FixedWindow},
			{Key: sluice.Key("bench", "m3"), Limit: log, Algorithm: multilimit.SlidingLog},
		},
	}
	for _, name := range []string{"tokenbucket-x2", "tokenbucket-x3", "mixed-x3"} {
		cs := cases[name]
		b.Run(name+"/one-call", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d, err := l.AllowN(b.Context(), cs, 1)
				if err != nil || !d.Allowed {
					b.Fatal(err, d)
				}
			}
		})
		b.Run(name+"/separate-calls", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, c := range cs {
					algorithm := c.Algorithm
					if algorithm == "" {
						algorithm = multilimit.TokenBucket
					}
					if _, err := own[algorithm].AllowN(b.Context(), c.Key, c.Limit, 1); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
