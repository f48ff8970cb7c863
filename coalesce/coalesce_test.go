package coalesce_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/gcra"
	"github.com/sluicehq/sluice/algorithms/slidinglog"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/coalesce"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/builtins"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/memstore"
)

func TestMain(m *testing.M) { builtins.Main(m) }

// newMemStore returns memstore.New(opts...), failing t on an error.
func newMemStore(t testing.TB, opts ...memstore.Option) *memstore.Store {
	t.Helper()
	s, err := memstore.New(opts...)
	require.NoError(t, err)
	return s
}

// slow delays every call to the wrapped limiter, so that calls pile up
// behind the ones in flight and batches form on every tier.
type slow struct {
	batchNext
	delay time.Duration
}

func (s slow) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	time.Sleep(s.delay)
	return s.batchNext.AllowN(ctx, key, limit, n)
}

func (s slow) AllowBatch(ctx context.Context, reqs []sluice.Request) ([]sluice.Result, error) {
	time.Sleep(s.delay)
	return s.batchNext.AllowBatch(ctx, reqs)
}

// TestConcurrentCallsDecideAsOneByOne hammers a few keys whose limits
// cannot refill during the test, from many goroutines, through batches:
// each key admits exactly its burst, and the allowed calls' Remaining are
// burst-1 down to 0, each once, which they are only if every waiter got
// its own result of a one-by-one order.
func TestConcurrentCallsDecideAsOneByOne(t *testing.T) {
	const (
		burst      = 20
		keys       = 8
		goroutines = 64
		calls      = 16 // per goroutine: 128 per key
	)
	limit := sluice.Limit{Rate: burst, Period: time.Hour, Burst: burst}
	algorithms := []struct {
		name      string
		new       func(sluice.Store) (batchNext, error)
		remaining bool // Remaining counts down by one per allowed call
	}{
		{"tokenbucket", func(s sluice.Store) (batchNext, error) { return tokenbucket.New(s) }, true},
		{"gcra", func(s sluice.Store) (batchNext, error) { return gcra.New(s) }, true},
		{"slidinglog", func(s sluice.Store) (batchNext, error) { return slidinglog.New(s) }, true},
	}
	for _, tc := range redistest.AllTiers() {
		tier := tc.Make(t)
		for _, alg := range algorithms {
			t.Run(tier.Name+"/"+alg.name, func(t *testing.T) {
				next, err := alg.new(tier.Store)
				require.NoError(t, err)
				l, err := coalesce.New(slow{batchNext: next, delay: 200 * time.Microsecond}, coalesce.WithMaxInFlight(2))
				require.NoError(t, err)
				prefix := sluicetest.UniqueKey(t)

				var mu sync.Mutex
				remaining := map[string][]int64{}
				var wg sync.WaitGroup
				for g := range goroutines {
					wg.Go(func() {
						for i := range calls {
							key := sluice.Key(fmt.Sprintf("%s-%d", prefix, (g+i)%keys))
							d, err := l.AllowN(t.Context(), key, limit, 1)
							if !assertNoError(t, err) {
								return
							}
							if d.Allowed {
								mu.Lock()
								remaining[key] = append(remaining[key], d.Remaining)
								mu.Unlock()
							}
						}
					})
				}
				wg.Wait()

				want := make([]int64, burst)
				for i := range want {
					want[i] = int64(i)
				}
				require.Len(t, remaining, keys)
				for key, got := range remaining {
					require.Len(t, got, burst, "key %s admitted exactly its burst", key)
					if alg.remaining {
						slices.Sort(got)
						require.Equal(t, want, got, "key %s: each allowed call has its own Remaining", key)
					}
				}
				st := l.Stats()
				require.EqualValues(t, goroutines*calls, st.Calls)
				require.Positive(t, st.Batches, "batches formed")
				require.Greater(t, st.Batched, 2*st.Batches, "batches carry more than two requests on average")
				require.Equal(t, tc.Cluster, st.ByHashTag, "grouping by tag only on a Cluster")
				t.Logf("%d calls, %d batches carrying %d", st.Calls, st.Batches, st.Batched)
			})
		}
	}
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}

// gate is a Next whose calls block until released, recording what they
// were asked.
type gate struct {
	batchNext
	mu      sync.Mutex
	batches [][]sluice.Request
	entered chan struct{}
	open    chan struct{}
	err     error
	// crossSlot refuses batches whose keys have different hash tags, as a
	// Cluster does; panics makes AllowBatch panic.
	crossSlot, panics bool
}

func newGate(t *testing.T) *gate {
	tb, err := tokenbucket.New(newMemStore(t))
	require.NoError(t, err)
	return &gate{batchNext: tb, entered: make(chan struct{}, 1000), open: make(chan struct{})}
}

func (g *gate) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	g.entered <- struct{}{}
	<-g.open
	g.mu.Lock()
	g.batches = append(g.batches, []sluice.Request{{Key: key, Limit: limit, N: n}})
	g.mu.Unlock()
	return g.batchNext.AllowN(ctx, key, limit, n)
}

func (g *gate) AllowBatch(ctx context.Context, reqs []sluice.Request) ([]sluice.Result, error) {
	g.entered <- struct{}{}
	<-g.open
	g.mu.Lock()
	g.batches = append(g.batches, slices.Clone(reqs))
	g.mu.Unlock()
	if g.err != nil {
		return nil, g.err
	}
	if g.panics {
		panic("boom")
	}
	if g.crossSlot {
		for _, r := range reqs[1:] {
			if ext.HashSlot(r.Key) != ext.HashSlot(reqs[0].Key) {
				return nil, fmt.Errorf("gate: %w", sluice.ErrCrossSlot)
			}
		}
	}
	return g.batchNext.AllowBatch(ctx, reqs)
}

// holdTheSlot starts a call that holds l's only slot until g opens, and
// returns once it is in g; the channel gets that call's error.
func holdTheSlot(l *coalesce.Limiter, g *gate) chan error {
	first := make(chan error, 1)
	go func() {
		_, err := l.AllowN(context.Background(), "first", sluice.PerSecond(10), 1)
		first <- err
	}()
	<-g.entered
	return first
}

// queueBehind starts one call that holds the only slot, then n more that
// queue behind it, and waits until they are queued.
func queueBehind(t *testing.T, l *coalesce.Limiter, g *gate, reqs []sluice.Request) (first chan error, results []chan result) {
	t.Helper()
	first = holdTheSlot(l, g)
	for _, r := range reqs {
		ch := make(chan result, 1)
		results = append(results, ch)
		go func() {
			d, err := l.AllowN(context.Background(), r.Key, r.Limit, r.N)
			ch <- result{d, err}
		}()
	}
	require.Eventually(t, func() bool { return l.Stats().Queued == len(reqs) }, 5*time.Second, time.Millisecond)
	return first, results
}

type result struct {
	d   sluice.Decision
	err error
}

// decideQueued queues reqs behind a call holding the slot, then opens the
// gate, checks that call and returns the queued calls' results, in the
// order of their requests.
func decideQueued(t *testing.T, l *coalesce.Limiter, g *gate, reqs []sluice.Request) []result {
	t.Helper()
	first, results := queueBehind(t, l, g, reqs)
	close(g.open)
	require.NoError(t, <-first)
	out := make([]result, len(results))
	for i, ch := range results {
		out[i] = <-ch
	}
	return out
}

func TestQueuedCallsLeaveAsOneBatch(t *testing.T) {
	g := newGate(t)
	l, err := coalesce.New(g, coalesce.WithMaxInFlight(1))
	require.NoError(t, err)
	var reqs []sluice.Request
	for range 5 {
		reqs = append(reqs, sluice.Request{Key: "k", Limit: sluice.PerSecond(3), N: 1})
	}
	reqs = append(reqs, sluice.Request{Key: "other", Limit: sluice.PerSecond(3), N: 2})
	var allowed, denied int
	for i, r := range decideQueued(t, l, g, reqs) {
		require.NoError(t, r.err)
		if i == 5 {
			require.True(t, r.d.Allowed)
			require.EqualValues(t, 1, r.d.Remaining, "the request of cost 2 got its own result")
			continue
		}
		if r.d.Allowed {
			allowed++
		} else {
			denied++
			require.Positive(t, r.d.RetryAfter)
		}
	}
	require.Equal(t, 3, allowed, "a burst of 3 on k")
	require.Equal(t, 2, denied)
	require.Len(t, g.batches, 2, "the first call, then one batch")
	require.Len(t, g.batches[1], 6)
	require.Equal(t, coalesce.Stats{Calls: 7, Batches: 1, Batched: 6}, l.Stats())
}

func TestAnInvalidRequestFailsAlone(t *testing.T) {
	g := newGate(t)
	l, err := coalesce.New(g, coalesce.WithMaxInFlight(1))
	require.NoError(t, err)
	reqs := []sluice.Request{
		{Key: "a", Limit: sluice.PerSecond(5), N: 1},
		{Key: "b", Limit: sluice.Limit{Rate: 0, Period: time.Second, Burst: 1}, N: 1},
		{Key: "", Limit: sluice.PerSecond(5), N: 1},
		{Key: "c", Limit: sluice.PerSecond(5), N: 6},
		{Key: "d", Limit: sluice.PerSecond(5), N: 1},
	}
	for i, r := range decideQueued(t, l, g, reqs) {
		switch i {
		case 0, 4:
			require.NoError(t, r.err)
			require.True(t, r.d.Allowed)
			require.EqualValues(t, 4, r.d.Remaining)
		case 1:
			require.ErrorIs(t, r.err, sluice.ErrInvalidLimit)
		case 2:
			require.ErrorIs(t, r.err, sluice.ErrInvalidKey)
		case 3:
			require.ErrorIs(t, r.err, sluice.ErrCostExceedsBurst)
		}
	}
	// Each refusal (made before sending) removed one request; the batch
	// finally sent held the valid pair (in the order they queued).
	last := g.batches[len(g.batches)-1]
	require.ElementsMatch(t, []string{"a", "d"}, []string{last[0].Key, last[1].Key})
}

func TestABatchErrorReachesEveryCaller(t *testing.T) {
	g := newGate(t)
	g.err = errors.New("connection reset")
	l, err := coalesce.New(g, coalesce.WithMaxInFlight(1))
	require.NoError(t, err)
	reqs := []sluice.Request{{Key: "a", Limit: sluice.PerSecond(5), N: 1}, {Key: "b", Limit: sluice.PerSecond(5), N: 1}}
	for _, r := range decideQueued(t, l, g, reqs) {
		require.ErrorContains(t, r.err, "connection reset")
	}
}

func TestACallerThatGivesUpLeavesTheQueue(t *testing.T) {
	g := newGate(t)
	l, err := coalesce.New(g, coalesce.WithMaxInFlight(1))
	require.NoError(t, err)
	first := holdTheSlot(l, g)
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := l.AllowN(ctx, "k", sluice.PerSecond(10), 1)
		gaveUp <- err
	}()
	require.Eventually(t, func() bool { return l.Stats().Queued == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-gaveUp, context.Canceled)
	require.Equal(t, 0, l.Stats().Queued)
	close(g.open)
	require.NoError(t, <-first)
	require.Len(t, g.batches, 1, "nothing was sent for the caller that gave up")

	// The slot is free again: the next call goes straight through.
	d, err := l.AllowN(context.Background(), "k", sluice.PerSecond(10), 1)
	require.NoError(t, err)
	require.EqualValues(t, 9, d.Remaining)
	_, err = l.AllowN(ctx, "k", sluice.PerSecond(10), 1)
	require.ErrorIs(t, err, context.Canceled, "an ended context is refused at once")
}

func TestBadOptions(t *testing.T) {
	tb, err := tokenbucket.New(newMemStore(t))
	require.NoError(t, err)
	_, err = coalesce.New(nil)
	require.Error(t, err)
	_, err = coalesce.New(tb, coalesce.WithMaxInFlight(0))
	require.ErrorContains(t, err, "coalesce: WithMaxInFlight(0): must be at least 1")
	_, err = coalesce.New(tb, coalesce.WithMaxBatch(1))
	require.ErrorContains(t, err, "coalesce: WithMaxBatch(1): must be 2 to")
	_, err = coalesce.New(tb, coalesce.WithMaxBatch(sluice.MaxBatch+1))
	require.ErrorContains(t, err, fmt.Sprintf("coalesce: WithMaxBatch(%d)", sluice.MaxBatch+1))
	_, err = coalesce.New(tb, coalesce.WithHashTagGroups(), nil)
	require.ErrorContains(t, err, "coalesce: option 1 is nil")
	l, err := coalesce.New(tb, coalesce.WithHashTagGroups())
	require.NoError(t, err)
	require.True(t, l.Stats().ByHashTag)
}

func TestACrossSlotBatchIsSplitByTag(t *testing.T) {
	g := newGate(t)
	g.crossSlot = true
	l, err := coalesce.New(g, coalesce.WithMaxInFlight(1))
	require.NoError(t, err)
	lim := sluice.PerSecond(5)
	reqs := []sluice.Request{
		{Key: sluice.Key("t1", "a"), Limit: lim, N: 1},
		{Key: sluice.Key("t2", "a"), Limit: lim, N: 1},
		{Key: sluice.Key("t1", "b"), Limit: lim, N: 1},
	}
	for _, r := range decideQueued(t, l, g, reqs) {
		require.NoError(t, r.err)
		require.True(t, r.d.Allowed)
		require.EqualValues(t, 4, r.d.Remaining)
	}
	require.True(t, l.Stats().ByHashTag, "grouping by tag from now on")
	var sent [][]string
	for _, b := range g.batches[2:] { // after the first call and the refused batch
		var keys []string
		for _, r := range b {
			keys = append(keys, r.Key)
		}
		sent = append(sent, keys)
	}
	require.Len(t, g.batches[1], 3, "the mixed batch was tried once")
	require.Len(t, sent, 2, "then once per tag")
	for _, keys := range sent {
		for _, k := range keys[1:] {
			require.Equal(t, ext.HashSlot(keys[0]), ext.HashSlot(k))
		}
	}
}

func TestAPanicInTheWrappedLimiterAnswersEveryone(t *testing.T) {
	g := newGate(t)
	g.panics = true
	l, err := coalesce.New(g, coalesce.WithMaxInFlight(1))
	require.NoError(t, err)
	first := holdTheSlot(l, g)
	lim := sluice.PerSecond(5)
	results := make(chan error, 3)
	panicked := make(chan any, 3)
	for _, key := range []string{"a", "b", "c"} {
		go func() {
			defer func() {
				if p := recover(); p != nil {
					panicked <- p
				}
			}()
			_, err := l.AllowN(context.Background(), key, lim, 1)
			results <- err
		}()
	}
	require.Eventually(t, func() bool { return l.Stats().Queued == 3 }, 5*time.Second, time.Millisecond)
	close(g.open)
	require.NoError(t, <-first)
	require.Equal(t, "boom", <-panicked, "the leader's own call panics, as a direct call would")
	for range 2 {
		require.ErrorContains(t, <-results, "panicked: boom")
	}
	// The slot came back: the next call goes straight through.
	d, err := l.AllowN(context.Background(), "a", lim, 1)
	require.NoError(t, err)
	require.True(t, d.Allowed)
}

func TestRefundAndResetPassThrough(t *testing.T) {
	tb, err := tokenbucket.New(newMemStore(t))
	require.NoError(t, err)
	l, err := coalesce.New(tb)
	require.NoError(t, err)
	other, err := tokenbucket.New(newMemStore(t)) // Capabilities spends on its own key "k"
	require.NoError(t, err)
	full, err := coalesce.New(other)
	require.NoError(t, err)
	require.Equal(t, []string{"refund", "reset", "batch", "bound", "lease", "leasebatch"},
		sluicetest.Capabilities(t, full), "every capability of the token bucket")
	lim := sluice.PerSecond(5)
	d, err := l.AllowN(t.Context(), "k", lim, 3)
	require.NoError(t, err)
	require.EqualValues(t, 2, d.Remaining)
	r, ok := sluice.As[sluice.Refunder](l)
	require.True(t, ok)
	d, err = r.Refund(t.Context(), "k", lim, 2)
	require.NoError(t, err)
	require.EqualValues(t, 4, d.Remaining)
	rs, ok := sluice.As[sluice.Resetter](l)
	require.True(t, ok)
	require.NoError(t, rs.Reset(t.Context(), "k"))
	d, err = l.AllowN(t.Context(), "k", lim, 0)
	require.NoError(t, err)
	require.EqualValues(t, 5, d.Remaining)
	require.Equal(t, coalesce.Stats{Calls: 2}, l.Stats(), "refunds and resets are neither AllowN calls nor batches")

	bare, err := coalesce.New(struct{ batchNext }{tb}) // no Refund, no Reset
	require.NoError(t, err)
	_, ok = sluice.As[sluice.Refunder](bare)
	require.False(t, ok, "no refunds over a limiter without them")
	_, ok = sluice.As[sluice.Resetter](bare)
	require.False(t, ok, "no resets over a limiter without them")
	var lim2 sluice.Limiter = bare
	_, ok = lim2.(sluice.Refunder)
	require.False(t, ok)
	_, ok = lim2.(sluice.Resetter)
	require.False(t, ok)
	require.Equal(t, []string{"batch"}, sluicetest.Capabilities(t, bare))
}

func TestByHashTagKeepsUntaggedKeysAlone(t *testing.T) {
	g := newGate(t)
	l, err := coalesce.New(g, coalesce.WithMaxInFlight(1), coalesce.WithHashTagGroups())
	require.NoError(t, err)
	lim := sluice.PerSecond(5)
	reqs := []sluice.Request{
		{Key: sluice.Key("t1", "a"), Limit: lim, N: 1},
		{Key: "plain", Limit: lim, N: 1},
		{Key: sluice.Key("t1", "b"), Limit: lim, N: 1},
		{Key: sluice.Key("t2"), Limit: lim, N: 1},
		{Key: "plain2", Limit: lim, N: 1},
	}
	for _, r := range decideQueued(t, l, g, reqs) {
		require.NoError(t, r.err)
		require.True(t, r.d.Allowed)
	}
	var sizes []int
	for _, b := range g.batches[1:] {
		sizes = append(sizes, len(b))
		for _, r := range b[1:] {
			require.Equal(t, ext.HashSlot(b[0].Key), ext.HashSlot(r.Key))
		}
	}
	require.ElementsMatch(t, []int{2, 1, 1, 1}, sizes, "t1's two keys together, the rest alone")
}

// batchNext is a limiter that takes batches, as coalesce needs.
type batchNext interface {
	sluice.Limiter
	sluice.BatchLimiter
}

// TestTheDefaultBoundIsPerCPU: with no WithMaxInFlight, calls go straight
// through until DefaultMaxInFlightPerCPU × GOMAXPROCS are in flight, and
// the next one queues.
func TestTheDefaultBoundIsPerCPU(t *testing.T) {
	g := newGate(t)
	l, err := coalesce.New(g)
	require.NoError(t, err)
	require.Equal(t, 2, coalesce.DefaultMaxInFlightPerCPU, "docs/scaling.md says 2 x GOMAXPROCS")
	bound := coalesce.DefaultMaxInFlightPerCPU * runtime.GOMAXPROCS(0)
	done := make(chan error, bound+1)
	for i := range bound + 1 {
		go func() {
			_, err := l.AllowN(context.Background(), fmt.Sprintf("k%d", i), sluice.PerSecond(10), 1)
			done <- err
		}()
	}
	for i := range bound {
		select {
		case <-g.entered:
		case <-time.After(5 * time.Second):
			t.Fatalf("%d calls went through of a bound of %d", i, bound)
		}
	}
	require.Eventually(t, func() bool { return l.Stats().Queued == 1 }, 5*time.Second, time.Millisecond,
		"the call beyond the bound waits")
	close(g.open)
	for range bound + 1 {
		require.NoError(t, <-done)
	}
	require.Len(t, g.batches, bound+1, "bound calls, then the queued one")
}
