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
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/ext/algorithm"
	"github.com/sluicehq/sluice/lease"
)

// opStore records the lease operations of every script call (1 take, 2
// release; 0 for a decision script), one slice per call, and holds every
// call while gated.
type opStore struct {
	sluice.Store
	gate  atomic.Pointer[chan struct{}]
	mu    sync.Mutex
	calls [][]int64
}

func (s *opStore) Run(ctx context.Context, script *sluice.Script, keys []string, args []int64) ([]int64, error) {
	if g := s.gate.Load(); g != nil {
		<-*g
	}
	var ops []int64
	switch script {
	case algorithm.LeaseScript:
		ops = []int64{args[4]}
	case algorithm.LeaseBatchScript:
		for i := range len(keys) / 2 {
			ops = append(ops, args[9*i+4])
		}
	default:
		ops = []int64{0}
	}
	s.mu.Lock()
	s.calls = append(s.calls, ops)
	s.mu.Unlock()
	return s.Store.Run(ctx, script, keys, args)
}

// since returns the calls recorded after the first n.
func (s *opStore) since(n int) [][]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]int64(nil), s.calls[n:]...)
}

func (s *opStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// requireReleasesOnly requires that calls are all releases, as many as
// want in all, in as few script calls as batches of sluice.MaxBatch allow.
func requireReleasesOnly(t *testing.T, calls [][]int64, want int) {
	t.Helper()
	released := 0
	for _, ops := range calls {
		for _, op := range ops {
			require.EqualValues(t, 2, op, "only releases: %v", calls)
		}
		released += len(ops)
	}
	require.Equal(t, want, released)
	require.Len(t, calls, (want+sluice.MaxBatch-1)/sluice.MaxBatch, "releases in batches of up to %d", sluice.MaxBatch)
}

// noRefillLimit refills too slowly to matter within a test, so what a
// bucket has left shows what the leases gave back.
var noRefillLimit = sluice.Limit{Rate: 1, Period: time.Hour, Burst: 100}

// leaseKeys leases from n keys through l, one token each (the lease holds
// a quarter of the other 99), and returns the keys.
func leaseKeys(t *testing.T, l *lease.Limiter, n int) []string {
	t.Helper()
	var keys []string
	for i := range n {
		k := sluice.Key(fmt.Sprint("tenant", i))
		d, err := l.AllowN(t.Context(), k, noRefillLimit, 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
		require.EqualValues(t, 24, l.Held(k))
		keys = append(keys, k)
	}
	return keys
}

// requireGivenBack requires that each key's bucket has all but the one
// token spent: every lease's unspent tokens went back.
func requireGivenBack(t *testing.T, tb *tokenbucket.Limiter, keys []string) {
	t.Helper()
	for _, k := range keys {
		g, err := tb.Lease(t.Context(), ext.LeaseRequest{Key: k, Limit: noRefillLimit, Holder: 1, Hold: time.Second})
		require.NoError(t, err)
		require.EqualValues(t, 99, g.Remaining, "key %s", k)
	}
}

// TestExpiredLeasesAreReleasedInBatches: the janitor releases the leases
// that expired together, in LeaseBatch calls of up to sluice.MaxBatch
// releases, not a call each; every unspent token goes back.
func TestExpiredLeasesAreReleasedInBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &opStore{Store: newMemStore(t)}
		tb, err := tokenbucket.New(store)
		require.NoError(t, err)
		l, err := lease.New(tb)
		require.NoError(t, err)
		defer func() { require.NoError(t, l.Close()) }()
		keys := leaseKeys(t, l, 300)
		synctest.Wait()
		before := store.count()

		time.Sleep(lease.DefaultHold)
		synctest.Wait()
		requireReleasesOnly(t, store.since(before), len(keys))
		require.EqualValues(t, len(keys), l.Stats().Releases)
		for _, k := range keys {
			require.Zero(t, l.Held(k))
		}
		requireGivenBack(t, tb, keys)
	})
}

// TestCloseReleasesInBatches: Close releases every lease in LeaseBatch
// calls of up to sluice.MaxBatch releases, and returns once they landed.
func TestCloseReleasesInBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &opStore{Store: newMemStore(t)}
		tb, err := tokenbucket.New(store)
		require.NoError(t, err)
		l, err := lease.New(tb, lease.WithHold(time.Minute))
		require.NoError(t, err)
		keys := leaseKeys(t, l, 300)
		synctest.Wait()
		before := store.count()
		require.NoError(t, l.Close())
		requireReleasesOnly(t, store.since(before), len(keys))
		requireGivenBack(t, tb, keys)
	})
}

// singlesOnly leases from a token bucket but takes no batches, and
// records each Release call.
type singlesOnly struct {
	tb       *tokenbucket.Limiter
	mu       sync.Mutex
	releases map[string][]int64 // key -> the unspent of each release
}

func (s *singlesOnly) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	return s.tb.AllowN(ctx, key, limit, n)
}

func (s *singlesOnly) Lease(ctx context.Context, req ext.LeaseRequest) (ext.Grant, error) {
	return s.tb.Lease(ctx, req)
}

func (s *singlesOnly) Release(ctx context.Context, key string, limit sluice.Limit, holder, unspent int64) (sluice.Decision, error) {
	s.mu.Lock()
	s.releases[key] = append(s.releases[key], unspent)
	s.mu.Unlock()
	return s.tb.Release(ctx, key, limit, holder, unspent)
}

func (s *singlesOnly) calls() (n int, byKey map[string][]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	byKey = map[string][]int64{}
	for k, v := range s.releases {
		byKey[k] = append([]int64(nil), v...)
		n += len(v)
	}
	return n, byKey
}

// TestWithoutBatchesEachReleaseIsACall: over a leaser that takes no
// batches, the janitor and Close release each lease in a Release call of
// its own, giving back its unspent tokens.
func TestWithoutBatchesEachReleaseIsACall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb, err := tokenbucket.New(newMemStore(t))
		require.NoError(t, err)
		next := &singlesOnly{tb: tb, releases: map[string][]int64{}}
		_, batches := sluice.As[ext.LeaseBatcher](next)
		require.False(t, batches)
		l, err := lease.New(next)
		require.NoError(t, err)
		keys := leaseKeys(t, l, 20)
		synctest.Wait()
		time.Sleep(lease.DefaultHold)
		synctest.Wait()
		n, byKey := next.calls()
		require.Equal(t, len(keys), n, "a call each")
		for _, k := range keys {
			require.Equal(t, []int64{24}, byKey[k], "key %s gave back its unspent tokens", k)
		}
		requireGivenBack(t, tb, keys)

		held := map[string]int64{}
		for _, k := range keys[:5] {
			_, err := l.AllowN(t.Context(), k, noRefillLimit, 1)
			require.NoError(t, err)
			held[k] = l.Held(k)
		}
		require.NoError(t, l.Close())
		n, byKey = next.calls()
		require.Equal(t, len(keys)+5, n, "Close released the 5 leased again, a call each")
		for _, k := range keys[:5] {
			require.Equal(t, []int64{24, held[k]}, byKey[k], "key %s", k)
		}
	})
}

// TestARequestWaitsForTheJanitorsRelease: while the janitor's release of
// an expired lease is on its way, a request for its key waits for it, and
// its own lease request reaches the store after the release: it never
// overtakes the release (which would end the new reservation).
func TestARequestWaitsForTheJanitorsRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &opStore{Store: newMemStore(t)}
		tb, err := tokenbucket.New(store)
		require.NoError(t, err)
		l, err := lease.New(tb)
		require.NoError(t, err)
		defer func() { require.NoError(t, l.Close()) }()
		keys := leaseKeys(t, l, 3)
		synctest.Wait()
		before := store.count()

		gate := make(chan struct{})
		store.gate.Store(&gate)
		// Past the leases' deadline (an eighth of the hold before the
		// store's reservations end), but not their end, so that the
		// releases give the tokens back at once when they land.
		time.Sleep(lease.DefaultHold * 15 / 16)
		synctest.Wait() // the janitor's releases wait at the gate
		var answered atomic.Bool
		var wg sync.WaitGroup
		wg.Go(func() {
			d, err := l.AllowN(context.Background(), keys[0], noRefillLimit, 1)
			require.NoError(t, err)
			require.True(t, d.Allowed)
			answered.Store(true)
		})
		synctest.Wait()
		require.False(t, answered.Load(), "the request waits for the release")
		store.gate.Store(nil)
		close(gate)
		wg.Wait()
		calls := store.since(before)
		require.Len(t, calls, 2, "the releases, then the request")
		require.Equal(t, []int64{2, 2, 2}, calls[0])
		require.Equal(t, []int64{1}, calls[1])
		// The new lease's reservation stands: the bucket has the 99 given
		// back, less the token spent and the tokens the new lease holds.
		held := l.Held(keys[0])
		require.Positive(t, held)
		g, err := tb.Lease(t.Context(), ext.LeaseRequest{Key: keys[0], Limit: noRefillLimit, Holder: 1, Hold: time.Second})
		require.NoError(t, err)
		require.Equal(t, 98-held, g.Remaining)
	})
}
