package lease_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/goredisstore"
	"github.com/sluicehq/sluice/store/memstore"
)

func storeFor(t *testing.T, server *sluicetest.RedisServer) sluice.Store {
	c := redis.NewClient(&redis.Options{Addr: server.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return goredisstore.New(c)
}

func TestMain(m *testing.M) { sluicetest.Main(m) }

// counting counts the calls that reach the shared limiter.
type counting struct {
	lease.Refunder
	calls, refunds atomic.Int64
}

func (c *counting) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	c.calls.Add(1)
	return c.Refunder.AllowN(ctx, key, limit, n)
}

func (c *counting) Refund(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	c.refunds.Add(1)
	return c.Refunder.Refund(ctx, key, limit, n)
}

// admit makes calls requests of cost 1 on key and counts those allowed.
func admit(t *testing.T, l *lease.Limiter, key string, limit sluice.Limit, calls int, admitted *atomic.Int64) {
	for range calls {
		d, err := l.AllowN(context.Background(), key, limit, 1)
		if err != nil {
			t.Error(err)
			return
		}
		if d.Allowed {
			admitted.Add(1)
		}
	}
}

// noRefill is a limit that does not refill during a test: what the pods
// admit together is bounded by the burst alone.
var noRefill = sluice.Limit{Rate: 1, Period: time.Hour, Burst: 1000}

func newShared(t *testing.T) (*tokenbucket.Limiter, *counting) {
	tb, err := tokenbucket.New(memstore.New())
	require.NoError(t, err)
	return tb, &counting{Refunder: tb}
}

func TestFewCallsPerDecision(t *testing.T) {
	_, shared := newShared(t)
	l, err := lease.New(shared, lease.WithBatch(100))
	require.NoError(t, err)
	defer l.Close()
	limit := sluice.PerSecond(1_000_000).WithBurst(1_000_000)
	for range 10_000 {
		d, err := l.AllowN(t.Context(), "k", limit, 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	require.LessOrEqual(t, shared.calls.Load(), int64(10_000/100+2), "one call per lease of 100")
}

func TestPodsNeverAdmitMoreThanTheSharedLimit(t *testing.T) {
	t.Run("refills one by one", func(t *testing.T) {
		tb, shared := newShared(t)
		podsShareALimit(t, tb, shared)
	})
	t.Run("refills in batches", func(t *testing.T) {
		shared := newBatching(t, 0)
		podsShareALimit(t, shared.Limiter, shared)
	})
}

// podsShareALimit runs 4 pods × 8 goroutines leasing from shared, whose
// token bucket is tb, and checks the bounds.
func podsShareALimit(t *testing.T, tb *tokenbucket.Limiter, shared lease.Refunder) {
	const pods, batch = 4, 50
	var admitted atomic.Int64
	var wg sync.WaitGroup
	limiters := make([]*lease.Limiter, pods)
	for p := range pods {
		l, err := lease.New(shared, lease.WithBatch(batch), lease.WithHold(time.Minute))
		require.NoError(t, err)
		limiters[p] = l
		for range 8 {
			wg.Go(func() { admit(t, l, "k", noRefill, 400, &admitted) })
		}
	}
	wg.Wait()
	t.Logf("admitted %d of a burst of %d", admitted.Load(), noRefill.Burst)
	require.LessOrEqual(t, admitted.Load(), noRefill.Burst, "leases are taken before they are spent")
	require.GreaterOrEqual(t, admitted.Load(), noRefill.Burst-pods*batch, "at most N × B sit unspent in leases")

	// Close refunds what the leases still hold.
	for _, l := range limiters {
		require.NoError(t, l.Close())
	}
	d, err := tb.AllowN(t.Context(), "k", noRefill, 0)
	require.NoError(t, err)
	require.Equal(t, noRefill.Burst-admitted.Load(), d.Remaining, "every unspent token went back")
}

func TestExpiredLeasesAreRefunded(t *testing.T) {
	tb, shared := newShared(t)
	l, err := lease.New(shared, lease.WithBatch(100), lease.WithHold(50*time.Millisecond))
	require.NoError(t, err)
	defer l.Close()
	d, err := l.AllowN(t.Context(), "k", noRefill, 1)
	require.NoError(t, err)
	require.Equal(t, int64(99), d.Remaining, "the lease's own tokens")
	deadline := time.Now().Add(5 * time.Second)
	for {
		p, err := tb.AllowN(t.Context(), "k", noRefill, 0)
		require.NoError(t, err)
		if p.Remaining == noRefill.Burst-1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the janitor refunds the expired lease (remaining %d)", p.Remaining)
		time.Sleep(10 * time.Millisecond)
	}
	require.Positive(t, shared.refunds.Load())
}

func TestLeasesShrinkAsTheBucketEmpties(t *testing.T) {
	t.Run("refills one by one", func(t *testing.T) {
		_, shared := newShared(t)
		leasesShrink(t, shared)
	})
	t.Run("refills in batches", func(t *testing.T) { leasesShrink(t, newBatching(t, 0)) })
}

func leasesShrink(t *testing.T, shared lease.Refunder) {
	l, err := lease.New(shared, lease.WithBatch(100), lease.WithHold(time.Minute))
	require.NoError(t, err)
	defer l.Close()
	limit := sluice.Limit{Rate: 1, Period: time.Hour, Burst: 120}
	admitted := 0
	for range 200 {
		d, err := l.AllowN(t.Context(), "k", limit, 1)
		require.NoError(t, err)
		if d.Allowed {
			admitted++
		}
	}
	// 100 leased first, then leases of a quarter of what is left: the
	// last 20 tokens are still taken and spent, none is stranded.
	require.Equal(t, 120, admitted)
	d, err := l.AllowN(t.Context(), "k", limit, 1)
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.Positive(t, d.RetryAfter, "a denial is the shared limiter's, with its RetryAfter")
}

func TestPassThroughAndBadInput(t *testing.T) {
	_, shared := newShared(t)
	l, err := lease.New(shared, lease.WithBatch(10))
	require.NoError(t, err)
	before := shared.calls.Load()
	d, err := l.AllowN(t.Context(), "k", noRefill, 50)
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.Equal(t, noRefill.Burst-50, d.Remaining, "a cost above B goes to the shared limiter")
	_, err = l.AllowN(t.Context(), "k", noRefill, 0)
	require.NoError(t, err)
	require.Equal(t, before+2, shared.calls.Load(), "and so does a peek")

	_, err = l.AllowN(t.Context(), "", noRefill, 1)
	require.ErrorIs(t, err, sluice.ErrInvalidKey)
	_, err = l.AllowN(t.Context(), "k", sluice.Limit{}, 1)
	require.ErrorIs(t, err, sluice.ErrInvalidLimit)
	_, err = l.AllowN(t.Context(), "k", noRefill, -1)
	require.ErrorIs(t, err, sluice.ErrInvalidCost)

	require.NoError(t, l.Close())
	require.NoError(t, l.Close())
	for _, n := range []int64{1, 0, 50} { // a lease, a peek, a cost above B
		_, err = l.AllowN(t.Context(), "k", noRefill, n)
		require.ErrorIs(t, err, lease.ErrClosed, "cost %d", n)
	}

	_, err = lease.New(nil)
	require.Error(t, err)
	for _, o := range []lease.Option{nil, lease.WithBatch(0), lease.WithHold(0)} {
		_, err := lease.New(shared, o)
		require.Error(t, err)
	}
}

// TestProcessesOnRealRedis: 4 OS processes × 8 goroutines lease from one
// token bucket on a real redis-server (B = 50), one of them dying without
// giving its lease back. Together they admit at most the unleased bound,
// Burst + Rate × T, and at least that minus N × B; the dead pod's tokens
// are lost only until the bucket refills.
func TestProcessesOnRealRedis(t *testing.T) {
	server := sluicetest.SharedRedis(t)
	const processes, batch = 4, 50
	limit := sluice.Limit{Rate: 400, Period: time.Second, Burst: 200}
	key := sluice.Key(sluicetest.UniqueKey(t))
	calls := sluicetest.RunLoad(t, sluicetest.Load{
		Algorithm: "tokenbucket", Backend: "rueidis", Addr: server.Addr(), Key: key, Limit: limit,
		Processes: processes, Goroutines: 8, Duration: 2 * time.Second, LeaseBatch: batch, Dead: 1,
	})
	allowed := float64(len(sluicetest.Allowed(calls)))
	span := sluicetest.Span(calls)
	bound := float64(limit.Burst) + float64(limit.Rate)*span.Seconds()
	t.Logf("%d calls over %s, %.0f allowed; unleased bound %.0f, lower bound %.0f (%.1f%% of the bound)",
		len(calls), span, allowed, bound, bound-processes*batch, 100*allowed/bound)
	require.LessOrEqual(t, allowed, bound)
	require.GreaterOrEqual(t, allowed, bound-processes*batch)

	// The dead pod's tokens come back as the bucket refills.
	tb, err := tokenbucket.New(storeFor(t, server))
	require.NoError(t, err)
	time.Sleep(time.Duration(float64(time.Second) * float64(limit.Burst) / float64(limit.Rate)))
	d, err := tb.AllowN(t.Context(), key, limit, 0)
	require.NoError(t, err)
	require.Equal(t, limit.Burst, d.Remaining, "full again after the refill time")
}

// batching is a shared limiter that takes batches, as every Sluice
// algorithm does, counting them; every call first waits for delay, and is
// then decided even if its caller gave up meanwhile (as a request already
// sent to Redis is).
type batching struct {
	*tokenbucket.Limiter
	fail                     atomic.Bool  // every call fails
	delay                    atomic.Int64 // nanoseconds
	single, batches, batched atomic.Int64
	crossSlot                atomic.Int64 // batches a Cluster refused
}

func (b *batching) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	b.single.Add(1)
	time.Sleep(time.Duration(b.delay.Load()))
	if b.fail.Load() {
		return sluice.Decision{}, errStore
	}
	return b.Limiter.AllowN(context.WithoutCancel(ctx), key, limit, n)
}

func (b *batching) AllowBatch(ctx context.Context, reqs []sluice.Request) ([]sluice.Result, error) {
	b.batches.Add(1)
	b.batched.Add(int64(len(reqs)))
	time.Sleep(time.Duration(b.delay.Load()))
	if b.fail.Load() {
		return nil, errStore
	}
	results, err := b.Limiter.AllowBatch(context.WithoutCancel(ctx), reqs)
	if errors.Is(err, sluice.ErrCrossSlot) {
		b.crossSlot.Add(1)
	}
	return results, err
}

var errStore = errors.New("store unavailable")

func newBatching(t *testing.T, delay time.Duration) *batching {
	return newBatchingOn(t, memstore.New(), delay)
}

func newBatchingOn(t *testing.T, store sluice.Store, delay time.Duration) *batching {
	tb, err := tokenbucket.New(store)
	require.NoError(t, err)
	b := &batching{Limiter: tb}
	b.delay.Store(int64(delay))
	return b
}

// TestRefillsGoInBatches: with many keys leased at once, the refills taken
// ahead of need leave together, several per call to the shared limiter, and
// the tokens add up exactly, on every tier. The 50 keys carry 5 hash tags.
// On a Cluster those span slots: the first batches are refused before they
// run, and the refills go grouped by tag from then on (keys of different
// tags cannot share a script there).
func TestRefillsGoInBatches(t *testing.T) {
	for _, tier := range sluicetest.AllTiers() {
		t.Run(tier.Name, func(t *testing.T) {
			shared := newBatchingOn(t, tier.Make(t).Store, 2*time.Millisecond)
			l, err := lease.New(shared, lease.WithBatch(10), lease.WithHold(time.Minute))
			require.NoError(t, err)
			limit := sluice.Limit{Rate: 1, Period: time.Hour, Burst: 1000}
			const keys, perKey = 50, 200
			prefix := sluicetest.UniqueKey(t)
			key := func(k int) string { return sluice.Key(fmt.Sprintf("%s-%d", prefix, k%5), fmt.Sprint(k)) }
			var wg sync.WaitGroup
			var admitted atomic.Int64
			for k := range keys {
				wg.Go(func() { admit(t, l, key(k), limit, perKey, &admitted) })
			}
			wg.Wait()
			require.NoError(t, l.Close())
			batches, batched := shared.batches.Load(), shared.batched.Load()
			t.Logf("%d refills in %d batches (%d refused as cross-slot), %d single calls",
				batched, batches, shared.crossSlot.Load(), shared.single.Load())
			require.Equal(t, int64(keys*perKey), admitted.Load(), "every request fits its key's burst")
			require.Greater(t, batched, 2*batches, "refills share calls")
			if tier.Cluster {
				// One refused batch per refill call in flight at the time.
				require.InDelta(t, 1.5, shared.crossSlot.Load(), 0.5, "refused batches, then grouped by tag")
			} else {
				require.Zero(t, shared.crossSlot.Load())
			}
			for k := range keys {
				d, err := shared.Limiter.AllowN(t.Context(), key(k), limit, 0)
				require.NoError(t, err)
				require.Equal(t, limit.Burst-perKey, d.Remaining, "key %d: exactly what was admitted is gone after Close", k)
			}
		})
	}
}

// TestConcurrentFirstCallsShareOneLease: calls that meet a key's lease
// empty while it is being taken wait for it instead of taking their own.
func TestConcurrentFirstCallsShareOneLease(t *testing.T) {
	shared := newBatching(t, 100*time.Millisecond)
	l, err := lease.New(shared, lease.WithBatch(100))
	require.NoError(t, err)
	defer l.Close()
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			d, err := l.AllowN(context.Background(), "k", noRefill, 1)
			if err != nil || !d.Allowed {
				t.Error(d, err)
			}
		})
	}
	wg.Wait()
	require.Equal(t, int64(1), shared.single.Load()+shared.batches.Load(), "one lease of 100 served all 16")
}

// TestCloseWaitsForRefillsInFlight: a refill on its way when Close is
// called is waited for and refunded with the rest, not lost.
func TestCloseWaitsForRefillsInFlight(t *testing.T) {
	shared := newBatching(t, 0)
	l, err := lease.New(shared, lease.WithBatch(10))
	require.NoError(t, err)
	for range 5 {
		_, err := l.AllowN(t.Context(), "k", noRefill, 1)
		require.NoError(t, err)
	}
	shared.delay.Store(int64(100 * time.Millisecond))
	// The 6th leaves 4 of 10, below half: a refill starts, and is still
	// on its way when Close is called.
	_, err = l.AllowN(t.Context(), "k", noRefill, 1)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	time.Sleep(300 * time.Millisecond) // time for a refill Close did not wait for to land
	d, err := shared.Limiter.AllowN(t.Context(), "k", noRefill, 0)
	require.NoError(t, err)
	require.Equal(t, noRefill.Burst-6, d.Remaining, "only the 6 spent are gone")
}

// slowTaker delays the shared limiter's AllowN and decides it even if its
// caller gives up. It takes no batches (it embeds the interface, not the
// token bucket), so every lease is a call of its own.
type slowTaker struct {
	lease.Refunder
	delay time.Duration
}

func (s *slowTaker) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	time.Sleep(s.delay)
	return s.Refunder.AllowN(context.WithoutCancel(ctx), key, limit, n)
}

// TestCloseDuringATakeLosesNothing: a lease a call is taking when Close
// is called is refunded when it arrives, apart from what the call spent.
func TestCloseDuringATakeLosesNothing(t *testing.T) {
	tb, err := tokenbucket.New(memstore.New())
	require.NoError(t, err)
	l, err := lease.New(&slowTaker{Refunder: tb, delay: 100 * time.Millisecond}, lease.WithBatch(10))
	require.NoError(t, err)
	done := make(chan error)
	go func() {
		_, err := l.AllowN(context.Background(), "k", noRefill, 1)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // the take is on its way
	require.NoError(t, l.Close())
	require.NoError(t, <-done)
	d, err := tb.AllowN(t.Context(), "k", noRefill, 0)
	require.NoError(t, err)
	require.Equal(t, noRefill.Burst-1, d.Remaining, "only the one spent is gone")
}

// TestCloseUnderLoadLosesNothing: Close while many goroutines spend on many
// keys, with refills on their way (and, with a short hold, leases expiring
// and being refunded all the while): afterwards each key's bucket is lower
// by exactly what was admitted from it, whatever the interleaving.
func TestCloseUnderLoadLosesNothing(t *testing.T) {
	for _, c := range []struct {
		batches bool
		hold    time.Duration // short: leases expire and are refunded all the time
	}{{false, time.Minute}, {true, time.Minute}, {false, 3 * time.Millisecond}, {true, 3 * time.Millisecond}} {
		batches := c.batches
		t.Run(fmt.Sprintf("batches=%t/hold=%s", batches, c.hold), func(t *testing.T) {
			for round := range 20 {
				tb, err := tokenbucket.New(memstore.New())
				require.NoError(t, err)
				var shared lease.Refunder = &slowTaker{Refunder: tb, delay: time.Millisecond}
				if batches {
					b := &batching{Limiter: tb}
					b.delay.Store(int64(time.Millisecond))
					shared = b
				}
				l, err := lease.New(shared, lease.WithBatch(10), lease.WithHold(c.hold))
				require.NoError(t, err)
				const keys = 8
				admitted := make([]atomic.Int64, keys)
				var wg sync.WaitGroup
				for g := range 32 {
					wg.Go(func() {
						for i := 0; ; i++ {
							k := (g + i) % keys
							d, err := l.AllowN(context.Background(), fmt.Sprintf("k%d", k), noRefill, 1)
							if errors.Is(err, lease.ErrClosed) {
								return
							}
							if err != nil {
								t.Error(err)
								return
							}
							if d.Allowed {
								admitted[k].Add(1)
							}
						}
					})
				}
				time.Sleep(time.Duration(5+round) * time.Millisecond)
				require.NoError(t, l.Close())
				wg.Wait()
				for k := range keys {
					d, err := tb.AllowN(t.Context(), fmt.Sprintf("k%d", k), noRefill, 0)
					require.NoError(t, err)
					require.Equal(t, noRefill.Burst-admitted[k].Load(), d.Remaining, "round %d, key %d", round, k)
				}
			}
		})
	}
}

// TestARefillForAReplacedLeaseGoesBack: a refill that arrives after its
// lease was replaced (the key asked for under another limit) is refunded.
func TestARefillForAReplacedLeaseGoesBack(t *testing.T) {
	shared := newBatching(t, 0)
	l, err := lease.New(shared, lease.WithBatch(10), lease.WithHold(time.Minute))
	require.NoError(t, err)
	for range 5 {
		_, err := l.AllowN(t.Context(), "k", noRefill, 1)
		require.NoError(t, err)
	}
	shared.delay.Store(int64(100 * time.Millisecond))
	_, err = l.AllowN(t.Context(), "k", noRefill, 1) // 4 of 10 left: a refill of 10 leaves
	require.NoError(t, err)
	shared.delay.Store(0)
	// The same rate and period with another burst: one token means the same
	// in both, so the bucket counts one sum.
	other := noRefill.WithBurst(2 * noRefill.Burst)
	_, err = l.AllowN(t.Context(), "k", other, 1)
	require.NoError(t, err)
	time.Sleep(200 * time.Millisecond) // the refill lands on the replaced lease
	require.NoError(t, l.Close())
	d, err := shared.Limiter.AllowN(t.Context(), "k", noRefill, 0)
	require.NoError(t, err)
	require.Equal(t, noRefill.Burst-7, d.Remaining, "the 7 spent are gone, nothing else")
}

// TestByHashTagOnARing: a go-redis Ring runs a batch on the shard of its
// first key and reports nothing, so with ByHashTag only keys of one tag
// share a batch of refills, and every key stays within its own bucket.
func TestByHashTagOnARing(t *testing.T) {
	a, b := sluicetest.StartRedis(t), sluicetest.StartRedis(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr(), "b": b.Addr()}, MaxRetries: -1})
	t.Cleanup(func() { _ = ring.Close() })
	tb, err := tokenbucket.New(goredisstore.New(ring))
	require.NoError(t, err)
	shared := &batching{Limiter: tb}
	shared.delay.Store(int64(2 * time.Millisecond)) // so that refills queue up
	l, err := lease.New(shared, lease.WithBatch(10), lease.WithHold(time.Minute), lease.ByHashTag())
	require.NoError(t, err)
	limit := sluice.Limit{Rate: 1, Period: time.Hour, Burst: 40}
	const keys = 40
	prefix := sluicetest.UniqueKey(t)
	key := func(k int) string { return sluice.Key(fmt.Sprintf("%s-%d", prefix, k)) }
	admitted := make([]atomic.Int64, keys)
	var wg sync.WaitGroup
	for k := range keys {
		for range 4 {
			wg.Go(func() { admit(t, l, key(k), limit, 15, &admitted[k]) })
		}
	}
	wg.Wait()
	require.NoError(t, l.Close())
	t.Logf("%d refills in %d batches", shared.batched.Load(), shared.batches.Load())
	for k := range keys {
		require.LessOrEqual(t, admitted[k].Load(), limit.Burst, "key %d", k)
		d, err := tb.AllowN(t.Context(), key(k), limit, 0)
		require.NoError(t, err)
		require.Equal(t, limit.Burst-admitted[k].Load(), d.Remaining, "key %d: its own bucket holds what it spent", k)
	}
}

// TestFirstLeasesOfManyKeysShareCalls: when many keys need their first
// lease at once, as when a process starts under load, the leases go in
// batches, not one call each.
func TestFirstLeasesOfManyKeysShareCalls(t *testing.T) {
	shared := newBatching(t, 20*time.Millisecond)
	l, err := lease.New(shared, lease.WithBatch(10))
	require.NoError(t, err)
	defer l.Close()
	const keys = 100
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for k := range keys {
		wg.Go(func() { admit(t, l, fmt.Sprintf("k%d", k), noRefill, 1, &admitted) })
	}
	wg.Wait()
	calls := shared.single.Load() + shared.batches.Load()
	t.Logf("%d first leases in %d calls", keys, calls)
	require.Equal(t, int64(keys), admitted.Load())
	require.LessOrEqual(t, calls, int64(keys/10), "first leases share calls")
}

// calls is how many calls reached the shared limiter.
func (b *batching) calls() int64 { return b.single.Load() + b.batches.Load() }

// TestAfterADenialOrAnErrorTheCallerTakesAlone: once a lease was denied or
// failed, the next is taken by the call that needs it, one call per
// decision, rather than queued and then asked for again.
func TestAfterADenialOrAnErrorTheCallerTakesAlone(t *testing.T) {
	t.Run("denied", func(t *testing.T) {
		shared := newBatching(t, 0)
		l, err := lease.New(shared, lease.WithBatch(10), lease.WithHold(time.Minute))
		require.NoError(t, err)
		defer l.Close()
		limit := sluice.Limit{Rate: 1, Period: time.Hour, Burst: 5}
		for i := 0; ; i++ {
			require.Less(t, i, 20, "the bucket empties")
			d, err := l.AllowN(t.Context(), "k", limit, 1)
			require.NoError(t, err)
			if !d.Allowed {
				break
			}
		}
		before := shared.calls()
		for range 10 {
			d, err := l.AllowN(t.Context(), "k", limit, 1)
			require.NoError(t, err)
			require.False(t, d.Allowed)
			require.Positive(t, d.RetryAfter)
		}
		require.Equal(t, int64(10), shared.calls()-before, "one call per denied decision")
	})
	t.Run("failed", func(t *testing.T) {
		shared := newBatching(t, 0)
		shared.fail.Store(true)
		l, err := lease.New(shared, lease.WithBatch(10))
		require.NoError(t, err)
		defer l.Close()
		for range 10 {
			_, err := l.AllowN(t.Context(), "k", noRefill, 1)
			require.ErrorIs(t, err, errStore)
		}
		require.LessOrEqual(t, shared.calls(), int64(11), "one call per decision, and one queued before the first")
	})
}

// TestACallNeedingMoreThanALeaseTakesWhatItNeeds: a request of cost above
// the next lease's size (but within B) asks for what it needs at once, so
// it is allowed whenever the shared limiter has that much.
func TestACallNeedingMoreThanALeaseTakesWhatItNeeds(t *testing.T) {
	shared := newBatching(t, 0)
	l, err := lease.New(shared, lease.WithBatch(10), lease.WithHold(time.Minute))
	require.NoError(t, err)
	defer l.Close()
	limit := sluice.Limit{Rate: 1, Period: time.Hour, Burst: 20}
	for _, n := range []int64{1, 9} { // a lease of 10, spent; the next, of 2, is taken in the background
		d, err := l.AllowN(t.Context(), "k", limit, n)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	time.Sleep(50 * time.Millisecond) // the refill of 2 lands: 2 held here, 8 left in the bucket
	d, err := l.AllowN(t.Context(), "k", limit, 8)
	require.NoError(t, err)
	require.True(t, d.Allowed, "8 are available: 2 here and 8 in the bucket")
}

// slowRefunds makes the shared limiter's refunds slow and records calls
// that arrive with their context already over.
type slowRefunds struct {
	*batching
	refundDelay time.Duration
	lateCalls   atomic.Int64
}

func (s *slowRefunds) Refund(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	time.Sleep(s.refundDelay)
	return s.batching.Refund(ctx, key, limit, n)
}

func (s *slowRefunds) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	if ctx.Err() != nil {
		s.lateCalls.Add(1)
	}
	return s.batching.AllowN(ctx, key, limit, n)
}

func (s *slowRefunds) AllowBatch(ctx context.Context, reqs []sluice.Request) ([]sluice.Result, error) {
	if ctx.Err() != nil {
		s.lateCalls.Add(1)
	}
	return s.batching.AllowBatch(ctx, reqs)
}

// TestSlowRefundsDoNotStopTheClock: the janitor refunds expired leases in
// the background, so slow refunds (a slow or failing Redis) neither stop
// the lease clock nor let the refills' context run out.
func TestSlowRefundsDoNotStopTheClock(t *testing.T) {
	shared := &slowRefunds{batching: newBatching(t, 0), refundDelay: 300 * time.Millisecond}
	l, err := lease.New(shared, lease.WithBatch(10), lease.WithHold(100*time.Millisecond))
	require.NoError(t, err)
	defer l.Close()
	for k := range 96 { // 96 leases that expire together: 6 rounds of 16 slow refunds
		_, err := l.AllowN(t.Context(), fmt.Sprintf("idle%d", k), noRefill, 1)
		require.NoError(t, err)
	}
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) { // meanwhile a busy key keeps refilling
		d, err := l.AllowN(t.Context(), "busy", sluice.PerSecond(1_000_000).WithBurst(1_000_000), 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
		time.Sleep(time.Millisecond)
	}
	require.Zero(t, shared.lateCalls.Load(), "no refill left with its context over")
}
