package lease_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/fixedwindow"
	"github.com/sluicehq/sluice/algorithms/gcra"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/builtins"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/goredisstore"
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

// shared is the shared limit the processes lease from: a token bucket that
// counts the calls reaching it, each first waiting for delay.
type shared struct {
	*tokenbucket.Limiter
	delay              atomic.Int64 // nanoseconds
	fail               atomic.Bool
	leases, releases   atomic.Int64
	allows             atomic.Int64
	maxInFlight, going atomic.Int64
}

var errStore = errors.New("store unavailable")

func newShared(t *testing.T) *shared {
	tb, err := tokenbucket.New(newMemStore(t))
	require.NoError(t, err)
	return &shared{Limiter: tb}
}

func (s *shared) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	s.allows.Add(1)
	return s.Limiter.AllowN(ctx, key, limit, n)
}

func (s *shared) Lease(ctx context.Context, req ext.LeaseRequest) (ext.Grant, error) {
	s.leases.Add(1)
	going := s.going.Add(1)
	defer s.going.Add(-1)
	for m := s.maxInFlight.Load(); going > m && !s.maxInFlight.CompareAndSwap(m, going); m = s.maxInFlight.Load() {
	}
	time.Sleep(time.Duration(s.delay.Load()))
	if s.fail.Load() {
		return ext.Grant{}, errStore
	}
	return s.Limiter.Lease(context.WithoutCancel(ctx), req)
}

func (s *shared) Release(ctx context.Context, key string, limit sluice.Limit, holder, unspent int64) (sluice.Decision, error) {
	s.releases.Add(1)
	return s.Limiter.Release(context.WithoutCancel(ctx), key, limit, holder, unspent)
}

// call is one decision made by a test's goroutine.
type call struct {
	start, end time.Time
	allowed    bool
}

// run makes cost-1 calls on key from goroutines of l until stop, one every
// every (as fast as it can when 0), and returns them.
func run(t *testing.T, l *lease.Limiter, key string, limit sluice.Limit, goroutines int, every time.Duration, stop time.Time) []call {
	var mu sync.Mutex
	var calls []call
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			var mine []call
			for time.Now().Before(stop) {
				start := time.Now()
				d, err := l.AllowN(context.Background(), key, limit, 1)
				if err != nil {
					t.Error(err)
					return
				}
				mine = append(mine, call{start, time.Now(), d.Allowed})
				if every > 0 {
					time.Sleep(every)
				}
			}
			mu.Lock()
			calls = append(calls, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return calls
}

func asLoad(calls []call) []builtins.Call {
	var out []builtins.Call
	for _, c := range calls {
		out = append(out, builtins.Call{Start: c.start.UnixNano(), End: c.end.UnixNano(), Allowed: c.allowed})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}

// windows are the interval lengths the bound is checked over.
var windows = []time.Duration{time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond, time.Second, 3 * time.Second}

// TestSpikeAfterIdleKeepsTheUnleasedBound is the pattern that broke the
// old lease: 10 processes serve light traffic, leaving leases holding
// tokens; they idle longer than the bucket takes to refill (and than the
// hold); then all spike at once for 0.2 s. Over every interval they admit
// at most Burst + Rate × T, as the unleased limiter would.
func TestSpikeAfterIdleKeepsTheUnleasedBound(t *testing.T) {
	for _, hold := range []time.Duration{time.Second, 5 * time.Second} {
		t.Run(hold.String(), func(t *testing.T) {
			sh := newShared(t)
			limit := sluice.Limit{Rate: 80, Period: time.Second, Burst: 100}
			key := sluice.Key(sluicetest.UniqueKey(t))
			const processes = 10
			var all []call
			var mu sync.Mutex
			var wg sync.WaitGroup
			start := time.Now()
			for range processes {
				l, err := lease.New(sh, lease.WithSize(50), lease.WithHold(hold))
				require.NoError(t, err)
				t.Cleanup(func() { _ = l.Close() })
				wg.Go(func() {
					light := run(t, l, key, limit, 2, 40*time.Millisecond, start.Add(300*time.Millisecond))
					time.Sleep(time.Until(start.Add(1800 * time.Millisecond))) // idle 1.5 s: the bucket would refill fully
					spike := run(t, l, key, limit, 8, 0, start.Add(2000*time.Millisecond))
					mu.Lock()
					all = append(all, light...)
					all = append(all, spike...)
					mu.Unlock()
				})
			}
			wg.Wait()
			allowed := builtins.Allowed(asLoad(all))
			var spike []builtins.Call
			for _, c := range allowed {
				if c.Start >= start.Add(1800*time.Millisecond).UnixNano() {
					spike = append(spike, c)
				}
			}
			span := builtins.Span(spike)
			spikeBound := float64(limit.Burst) + float64(limit.Rate)*span.Seconds()
			excess, at := builtins.BucketExcess(allowed, limit, windows...)
			t.Logf("hold %s: %d allowed in the spike, over %s (bound %.1f); worst window %s at %.0f over its bound",
				hold, len(spike), span, spikeBound, at, excess)
			require.LessOrEqual(t, excess, 0.0, "some interval of %s admitted more than Burst + Rate × T", at)
			require.LessOrEqual(t, float64(len(spike)), spikeBound, "the spike: at most Burst + Rate × its span")
			require.Greater(t, len(spike), 50, "the spike is served from the bucket, not starved")
		})
	}
}

// TestProcessesOnRealRedis: the same pattern, in 10 processes on a real
// redis-server through rueidis; two die holding leases.
func TestProcessesOnRealRedis(t *testing.T) {
	server := redistest.SharedRedis(t)
	limit := sluice.Limit{Rate: 80, Period: time.Second, Burst: 100}
	key := sluice.Key(sluicetest.UniqueKey(t))
	calls := builtins.RunLoad(t, builtins.Load{
		Algorithm: "tokenbucket", Backend: "rueidis", Addr: server.Addr(), Key: key, Limit: limit,
		Processes: 10, Goroutines: 4, LeaseBatch: 50, LeaseHold: time.Second, Dead: 2,
		Light: 300 * time.Millisecond, LightEvery: 40 * time.Millisecond, Idle: 1500 * time.Millisecond,
		Duration: 200 * time.Millisecond,
	})
	allowed := builtins.Allowed(calls)
	excess, at := builtins.BucketExcess(allowed, limit, windows...)
	t.Logf("%d calls, %d allowed; worst window %s at %.0f over Burst + Rate × T", len(calls), len(allowed), at, excess)
	require.LessOrEqual(t, excess, 0.0, "some interval of %s admitted more than Burst + Rate × T", at)
	require.Greater(t, len(allowed), 100, "the spike is served")

	// The dead processes' reservations expire, and the bucket refills
	// into them at the rate: full again a hold plus a refill time later.
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{server.Addr()}, DisableCache: true})
	require.NoError(t, err)
	defer client.Close()
	store, err := rueidisstore.New(client)
	require.NoError(t, err)
	tb, err := tokenbucket.New(store)
	require.NoError(t, err)
	time.Sleep(time.Second + 1300*time.Millisecond)
	g, err := tb.Lease(t.Context(), ext.LeaseRequest{Key: key, Limit: limit, Holder: 1, Hold: time.Second})
	require.NoError(t, err)
	require.Equal(t, limit.Burst, g.Remaining, "full again after the hold and the refill time")
}

// TestNoHoardingByWaiters: goroutines that find the lease empty while the
// next is on its way wait for it; none takes a lease of its own. One
// process of B = 50 and 8 goroutines, on a slow store, never holds as many
// as 2 × its largest lease (8 × B by default, B with WithMaxSize(B)), and
// at most one request is ever in flight.
func TestNoHoardingByWaiters(t *testing.T) {
	for _, maxBatch := range []int64{0, 50} {
		t.Run(fmt.Sprintf("max batch %d", maxBatch), func(t *testing.T) {
			sh := newShared(t)
			sh.delay.Store(int64(2 * time.Millisecond))
			opts := []lease.Option{lease.WithSize(50)}
			most := int64(2*8*50 - 1)
			if maxBatch > 0 {
				opts = append(opts, lease.WithMaxSize(maxBatch))
				most = 2*maxBatch - 1
			}
			l, err := lease.New(sh, opts...)
			require.NoError(t, err)
			defer l.Close()
			key := sluice.Key(sluicetest.UniqueKey(t))
			limit := sluice.PerSecond(1_000_000).WithBurst(1_000_000)
			stop := time.Now().Add(500 * time.Millisecond)
			var held atomic.Int64
			var wg sync.WaitGroup
			wg.Go(func() {
				for time.Now().Before(stop) {
					held.Store(max(held.Load(), l.Held(key)))
					time.Sleep(50 * time.Microsecond)
				}
			})
			calls := run(t, l, key, limit, 8, 0, stop)
			wg.Wait()
			t.Logf("%d decisions, %d requests, most held %d, most in flight %d", len(calls), l.Stats().Requests, held.Load(), sh.maxInFlight.Load())
			require.LessOrEqual(t, held.Load(), most)
			require.EqualValues(t, 1, sh.maxInFlight.Load(), "one request per key and process at a time")
			require.Greater(t, len(calls), 1000)
		})
	}
}

// TestFewCallsPerDecision: on a hot key, at most one request per 50
// decisions at B = 100.
func TestFewCallsPerDecision(t *testing.T) {
	sh := newShared(t)
	l, err := lease.New(sh, lease.WithSize(100))
	require.NoError(t, err)
	defer l.Close()
	limit := sluice.PerSecond(1_000_000).WithBurst(1_000_000)
	calls := run(t, l, "k", limit, 8, 0, time.Now().Add(300*time.Millisecond))
	for _, c := range calls {
		require.True(t, c.allowed)
	}
	requests := sh.leases.Load() + sh.allows.Load()
	t.Logf("%d decisions, %d requests: %.4f a decision", len(calls), requests, float64(requests)/float64(len(calls)))
	require.LessOrEqual(t, requests*50, int64(len(calls)))
}

// TestCloseGivesBackEveryUnspentToken: after Close, what the processes did
// not spend is back in the bucket, exactly. With leases kept at B = 50 the
// four processes hold at most 4 × 99 tokens, so the 600 requests always
// find a token free among the 1000 and are all allowed.
func TestCloseGivesBackEveryUnspentToken(t *testing.T) {
	sh := newShared(t)
	noRefill := sluice.Limit{Rate: 1, Period: time.Hour, Burst: 1000}
	var admitted atomic.Int64
	var limiters []*lease.Limiter
	var wg sync.WaitGroup
	for range 4 {
		l, err := lease.New(sh, lease.WithSize(50), lease.WithMaxSize(50), lease.WithHold(time.Minute))
		require.NoError(t, err)
		limiters = append(limiters, l)
		wg.Go(func() {
			for range 150 {
				d, err := l.AllowN(context.Background(), "k", noRefill, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 600, admitted.Load())
	for _, l := range limiters {
		require.NoError(t, l.Close())
		_, err := l.AllowN(t.Context(), "k", noRefill, 1)
		require.ErrorIs(t, err, lease.ErrClosed)
	}
	g, err := sh.Limiter.Lease(t.Context(), ext.LeaseRequest{Key: "k", Limit: noRefill, Holder: 1, Hold: time.Second})
	require.NoError(t, err)
	require.EqualValues(t, 1000-600, g.Remaining)
}

// TestALeaseIdleForItsHoldIsReleased: an idle lease goes back within its
// hold, and the tokens it held are available to other processes.
func TestALeaseIdleForItsHoldIsReleased(t *testing.T) {
	sh := newShared(t)
	noRefill := sluice.Limit{Rate: 1, Period: time.Hour, Burst: 100}
	a, err := lease.New(sh, lease.WithSize(60), lease.WithHold(100*time.Millisecond))
	require.NoError(t, err)
	defer a.Close()
	b, err := lease.New(sh, lease.WithSize(60), lease.WithHold(100*time.Millisecond))
	require.NoError(t, err)
	defer b.Close()
	d, err := a.AllowN(t.Context(), "k", noRefill, 1)
	require.NoError(t, err)
	require.True(t, d.Allowed)
	require.EqualValues(t, 24, a.Held("k"), "a lease of a quarter of the 99 left after the cost")
	// b sees what a does not hold.
	d, err = b.AllowN(t.Context(), "k", noRefill, 76)
	require.NoError(t, err)
	require.False(t, d.Allowed, "a's 24 are reserved: 75 are left")
	require.Eventually(t, func() bool { return sh.releases.Load() >= 1 && a.Held("k") == 0 }, time.Second, 5*time.Millisecond)
	d, err = b.AllowN(t.Context(), "k", noRefill, 99)
	require.NoError(t, err)
	require.True(t, d.Allowed, "a's unspent tokens went back")
}

// TestDecisionsReportTheSharedLimit: under a lease of a limit of 1000, a
// decision's Limit is the caller's and Remaining estimates what the shared
// limit has left, not what the local lease has.
func TestDecisionsReportTheSharedLimit(t *testing.T) {
	sh := newShared(t)
	l, err := lease.New(sh, lease.WithSize(50))
	require.NoError(t, err)
	defer l.Close()
	limit := sluice.PerMinute(1000).WithBurst(1000)
	var d sluice.Decision
	for i := range 100 {
		d, err = l.AllowN(t.Context(), "k", limit, 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
		require.Equal(t, limit, d.Limit)
		require.InDelta(t, 1000-(i+1), d.Remaining, 2, "call %d: %+v", i, d)
	}
	require.True(t, d.Estimated)
	require.Greater(t, d.ResetAfter, time.Duration(0))
	// A denial is the shared limit's, with its RetryAfter.
	d, err = l.AllowN(t.Context(), "k", limit, 1000)
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.Greater(t, d.RetryAfter, time.Duration(0))
}

// TestWaitersShareADenial: near the limit, the calls that waited for a
// denied request are denied with it, and make no request of their own.
func TestWaitersShareADenial(t *testing.T) {
	sh := newShared(t)
	sh.delay.Store(int64(20 * time.Millisecond))
	l, err := lease.New(sh, lease.WithSize(10))
	require.NoError(t, err)
	defer l.Close()
	limit := sluice.Limit{Rate: 1, Period: time.Hour, Burst: 10}
	for range 10 {
		d, err := l.AllowN(t.Context(), "k", limit, 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	before := sh.leases.Load()
	var denied atomic.Int64
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			d, err := l.AllowN(context.Background(), "k", limit, 1)
			if err == nil && !d.Allowed && d.RetryAfter > 0 {
				denied.Add(1)
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 20, denied.Load())
	require.LessOrEqual(t, sh.leases.Load()-before, int64(3), "the waiters shared the denial")
}

func TestOnlyALeaserCanBeLeasedFrom(t *testing.T) {
	fw, err := fixedwindow.New(newMemStore(t))
	require.NoError(t, err)
	_, err = lease.New(fw)
	require.ErrorIs(t, err, sluice.ErrUnsupported)
	require.True(t, strings.Contains(err.Error(), "lease") && strings.Contains(err.Error(), "fixedwindow"), err.Error())
	_, err = lease.New(nil)
	require.Error(t, err)
	g, err := gcra.New(newMemStore(t))
	require.NoError(t, err)
	require.Equal(t, []string{"refund", "reset", "batch", "bound", "lease", "leasebatch"}, sluicetest.Capabilities(t, g))
	l, err := lease.New(g)
	require.NoError(t, err)
	defer l.Close()
	require.Equal(t, []string{"refund", "reset", "batch", "bound"}, sluicetest.Capabilities(t, l),
		"what GCRA serves but leases: a lease does not lease to another")
	_, ok := sluice.As[ext.Leaser](l)
	require.False(t, ok, "a lease does not lease to another")
	_, ok = sluice.As[ext.LeaseBatcher](l)
	require.False(t, ok)
	requireOwnType(t, l)
	require.NoError(t, l.Close())
}

// requireOwnType requires that l's own type implements exactly what it always
// serves (batch, bound): every other optional interface it serves only through
// sluice.As, when the limiter it wraps does.
func requireOwnType(t *testing.T, l sluice.Limiter) {
	t.Helper()
	require.Equal(t, []string{"batch", "bound"}, sluicetest.OwnCapabilities(l), "%T", l)
}

// TestOverALeaserOnlyItServesBatchesAndCapacityOnly: over a limiter that
// leases and serves nothing else optional, a lease.Limiter serves what it
// always serves, batches and Capacity, and no refund or reset.
func TestOverALeaserOnlyItServesBatchesAndCapacityOnly(t *testing.T) {
	next := &sluicetest.RecordingLeaser{FullLimit: true}
	require.Equal(t, []string{"lease"}, sluicetest.Capabilities(t, next))
	l, err := lease.New(next, lease.WithSize(10))
	require.NoError(t, err)
	defer l.Close()
	require.Equal(t, []string{"batch", "bound"}, sluicetest.Capabilities(t, l))
	_, ok := sluice.As[sluice.Refunder](l)
	require.False(t, ok)
	_, ok = sluice.As[sluice.Resetter](l)
	require.False(t, ok)
	requireOwnType(t, l)
	limit := sluice.PerSecond(10).WithBurst(20)
	c, err := l.Capacity("k", limit)
	require.NoError(t, err)
	require.Equal(t, limit.Burst, c)
	res, err := l.AllowBatch(t.Context(), []sluice.Request{{Key: "k", Limit: limit, N: 1}, {Key: "k", Limit: limit, N: 1}})
	require.NoError(t, err)
	require.Len(t, res, 2)
	for _, r := range res {
		require.NoError(t, r.Err)
		require.True(t, r.Decision.Allowed)
	}
	require.NoError(t, l.Close())
}

func TestBadInputIsAnError(t *testing.T) {
	sh := newShared(t)
	for name, opts := range map[string][]lease.Option{
		"nil option":   {nil},
		"batch 0":      {lease.WithSize(0)},
		"max below B":  {lease.WithSize(10), lease.WithMaxSize(5)},
		"max batch 0":  {lease.WithMaxSize(0)},
		"hold 0":       {lease.WithHold(0)},
		"hold 1.5 ms":  {lease.WithHold(1500 * time.Microsecond)},
		"hold 2 hours": {lease.WithHold(2 * time.Hour)},
	} {
		_, err := lease.New(sh, opts...)
		require.Error(t, err, name)
	}
	l, err := lease.New(sh)
	require.NoError(t, err)
	defer l.Close()
	limit := sluice.PerSecond(10).WithBurst(20)
	for name, n := range map[string]int64{"negative": -1, "above burst": 21} {
		_, err := l.AllowN(t.Context(), "k", limit, n)
		require.ErrorIs(t, err, sluice.ErrInvalidCost, name)
	}
	_, err = l.AllowN(t.Context(), "", limit, 1)
	require.ErrorIs(t, err, sluice.ErrInvalidKey)
	_, err = l.AllowN(t.Context(), "k", sluice.Limit{Rate: 0, Period: time.Second, Burst: 1}, 1)
	require.ErrorIs(t, err, sluice.ErrInvalidLimit)
	_, err = l.AllowN(t.Context(), "k", sluice.Limit{Rate: 600000, Period: time.Second, Burst: 1}, 1)
	require.ErrorIs(t, err, sluice.ErrInvalidLimit, "the token bucket's own interval rule")
}

// TestRefundGoesBackIntoTheLease: a refund through the lease is spent
// again locally, within what the lease reserves.
func TestRefundGoesBackIntoTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh := newShared(t)
		l, err := lease.New(sh, lease.WithSize(10))
		require.NoError(t, err)
		defer l.Close()
		limit := sluice.Limit{Rate: 1, Period: time.Hour, Burst: 100}
		for range 5 {
			_, err := l.AllowN(t.Context(), "k", limit, 1)
			require.NoError(t, err)
		}
		synctest.Wait() // the background refill has landed
		held := l.Held("k")
		r, ok := sluice.As[sluice.Refunder](l)
		require.True(t, ok)
		_, err = r.Refund(t.Context(), "k", limit, 2)
		require.NoError(t, err)
		require.Equal(t, held+2, l.Held("k"))
	})
}

// TestAFailingStoreIsAnError: a request that fails is the caller's error,
// and the lease recovers once the store does.
func TestAFailingStoreIsAnError(t *testing.T) {
	sh := newShared(t)
	l, err := lease.New(sh, lease.WithSize(10))
	require.NoError(t, err)
	defer l.Close()
	sh.fail.Store(true)
	limit := sluice.PerSecond(100).WithBurst(100)
	_, err = l.AllowN(t.Context(), "k", limit, 1)
	require.ErrorIs(t, err, errStore)
	sh.fail.Store(false)
	d, err := l.AllowN(t.Context(), "k", limit, 1)
	require.NoError(t, err)
	require.True(t, d.Allowed)
}

// TestLeasesOfManyKeysShareCalls: the lease requests of many keys leave
// together, several in one script call, on miniredis and a real
// redis-server, and on a Redis Cluster grouped by hash tag; every
// decision is right.
func TestLeasesOfManyKeysShareCalls(t *testing.T) {
	tiers := []sluicetest.Tier{sluicetest.MemTier(t), redistest.MiniredisTier(t),
		redistest.GoRedisTier(t, redistest.SharedRedis(t)), redistest.GoRedisClusterTier(t, redistest.SharedCluster(t))}
	for _, tier := range tiers {
		t.Run(tier.Name, func(t *testing.T) {
			store := &sluicetest.CountingStore{Store: tier.Store}
			tb, err := tokenbucket.New(store)
			require.NoError(t, err)
			l, err := lease.New(tb, lease.WithSize(10))
			require.NoError(t, err)
			defer l.Close()
			limit := sluice.Limit{Rate: 1, Period: time.Hour, Burst: 20}
			base := sluicetest.UniqueKey(t)
			var keys []string
			for i := range 100 {
				keys = append(keys, sluice.Key(fmt.Sprintf("%s-%d", base, i%5), fmt.Sprint(i)))
			}
			var allowed atomic.Int64
			var wg sync.WaitGroup
			for _, k := range keys {
				wg.Go(func() {
					for range 25 {
						d, err := l.AllowN(context.Background(), k, limit, 1)
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
			t.Logf("%s: %d allowed of %d; %d lease requests in %d script calls", tier.Name, allowed.Load(), 100*25, l.Stats().Requests, store.Runs.Load())
			require.EqualValues(t, 100*20, allowed.Load(), "each key's burst, exactly")
			require.LessOrEqual(t, store.Runs.Load(), l.Stats().Requests)
			if tier.Name != "memstore" { // in process, a call ends before the next can join it
				require.Less(t, store.Runs.Load()*2, l.Stats().Requests, "requests share calls")
			}
		})
	}
}

// TestByHashTagOnARing: a go-redis Ring runs a batch on the shard of its
// first key and says nothing, so lease requests of keys on different
// shards must not share a batch; with WithHashTagGroups they go grouped by hash
// tag, and every key admits exactly its burst.
func TestByHashTagOnARing(t *testing.T) {
	a, b := redistest.StartRedis(t), redistest.StartRedis(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr(), "b": b.Addr()}, MaxRetries: -1})
	t.Cleanup(func() { _ = ring.Close() })
	store, err := goredisstore.New(ring)
	require.NoError(t, err)
	tb, err := tokenbucket.New(store)
	require.NoError(t, err)
	l, err := lease.New(tb, lease.WithSize(5), lease.WithHashTagGroups())
	require.NoError(t, err)
	defer l.Close()
	limit := sluice.Limit{Rate: 1, Period: time.Hour, Burst: 20}
	base := sluicetest.UniqueKey(t)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for i := range 50 {
		key := sluice.Key(fmt.Sprintf("%s-%d", base, i%10), fmt.Sprint(i))
		wg.Go(func() {
			for range 30 {
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
	require.EqualValues(t, 50*20, allowed.Load(), "each key's burst, exactly")
}
