package fallback_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/sluicetest"
)

var leaseReq = ext.LeaseRequest{Key: "k", Limit: limit, Holder: 42, Cost: 2, Extra: 5, Held: 1, Hold: 100 * time.Millisecond}

// newLeaser serves leases, recording each lease and release; after Fail,
// every call fails.
func newLeaser() *sluicetest.RecordingLeaser {
	return &sluicetest.RecordingLeaser{
		Grant: ext.Grant{Decision: sluice.Decision{Allowed: true, Limit: limit, Remaining: 3}, Extra: 5, Expires: 100 * time.Millisecond},
		Freed: sluice.Decision{Allowed: true, Limit: limit, Remaining: 7},
	}
}

// requireClaimsNothing requires that l's own type implements exactly what it always
// serves (nothing): every other optional interface it serves only through
// sluice.As, when the limiter it wraps does.
func requireClaimsNothing(t *testing.T, l sluice.Limiter) {
	t.Helper()
	require.Equal(t, []string(nil), sluicetest.OwnCapabilities(l), "%T", l)
}

func TestOverAllowNOnlyEveryCapabilityIsUnsupported(t *testing.T) {
	next := sluicetest.AllowOnly{}
	l, err := fallback.New(next)
	require.NoError(t, err)
	require.Empty(t, sluicetest.Capabilities(t, next))
	require.Equal(t, sluicetest.Capabilities(t, next), sluicetest.Capabilities(t, l), "exactly what the wrapped limiter serves")
	require.Empty(t, sluicetest.Capabilities(t, l))
	requireClaimsNothing(t, l)
	require.Equal(t, fallback.BreakerClosed, l.Stats().Breaker, "an unsupported call is no store failure")

	d, err := l.AllowN(t.Context(), "k", limit, 1)
	require.NoError(t, err)
	require.Equal(t, sluice.SourceStore, d.Source, "AllowN is served")
}

// TestOverAnAlgorithmItServesWhatTheAlgorithmServes: over the token
// bucket, the Limiter serves exactly what the token bucket serves
// (refunds, resets, batches, Capacity, leases and batches of leases), each
// through sluice.As only: its own type claims none.
func TestOverAnAlgorithmItServesWhatTheAlgorithmServes(t *testing.T) {
	tb, err := tokenbucket.New(newMemStore(t))
	require.NoError(t, err)
	all := []string{"refund", "reset", "batch", "bound", "lease", "leasebatch"}
	require.Equal(t, all, sluicetest.Capabilities(t, tb))
	l, err := fallback.New(tb)
	require.NoError(t, err)
	require.Equal(t, all, sluicetest.Capabilities(t, l))
	requireClaimsNothing(t, l)
	require.Equal(t, fallback.BreakerClosed, l.Stats().Breaker)
}

func TestLeaseAndReleaseReachTheLeaserUnchanged(t *testing.T) {
	next := newLeaser()
	l, err := fallback.New(next)
	require.NoError(t, err)
	requireClaimsNothing(t, l)
	le, ok := sluice.As[ext.Leaser](l)
	require.True(t, ok)

	next.RequireLeaseForwarded(t, le, leaseReq, 3)
	// After the forwarding check, which requires the leaser's first calls:
	// sluicetest.Capabilities leases and releases once more.
	require.Equal(t, []string{"lease"}, sluicetest.Capabilities(t, l))
	require.Equal(t, fallback.BreakerClosed, l.Stats().Breaker)
}

func TestAFailedLeaseIsDecidedByThePolicyAndLeasesNothing(t *testing.T) {
	local, err := tokenbucket.New(newMemStore(t))
	require.NoError(t, err)
	localPolicy, err := fallback.Local(local, fallback.Replicas(2))
	require.NoError(t, err)
	cases := []struct {
		name   string
		policy fallback.Policy
		want   sluice.Decision
	}{
		{"open", fallback.Open(), sluice.Decision{Allowed: true, Limit: limit, Source: sluice.SourceFallbackOpen}},
		{"closed", fallback.Closed(), sluice.Decision{Limit: limit, RetryAfter: time.Minute, Source: sluice.SourceFallbackClosed}},
		// Cost 2 of a share of 5 (10 / 2 replicas): 3 left.
		{"local", localPolicy, sluice.Decision{Allowed: true, Limit: fallback.LocalShare(limit, 2), Remaining: 3, ResetAfter: 400 * time.Millisecond,
			Source: sluice.SourceFallbackLocal}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			next := newLeaser()
			next.Fail(errors.New("dial tcp: connection refused"))
			l, err := fallback.New(next, fallback.WithPolicy(c.policy), fallback.WithBreaker(fallback.Breaker{Failures: 2, Cooldown: time.Minute, Probes: 1}))
			require.NoError(t, err)
			le, ok := sluice.As[ext.Leaser](l)
			require.True(t, ok)
			for i := range 4 {
				g, err := le.Lease(t.Context(), leaseReq)
				require.NoError(t, err)
				if i == 0 {
					require.Equal(t, ext.Grant{Decision: c.want}, g, "the policy decides Cost; Extra and Expires are 0")
				}
				require.Zero(t, g.Extra)
				require.Zero(t, g.Expires)
				require.Equal(t, c.want.Source, g.Source)
			}
			leases := len(next.Leases())
			require.Equal(t, 2, leases, "the breaker opened after 2 failed leases: no more calls")
			require.Equal(t, fallback.BreakerOpen, l.Stats().Breaker)

			// A release is not the policy's: with the breaker open it
			// still goes to the store, and its failure is an error.
			_, err = le.Release(t.Context(), "k", limit, 42, 3)
			require.ErrorContains(t, err, "connection refused")
			releases := len(next.Releases())
			require.Equal(t, 1, releases)
		})
	}
}

func TestALeaseConfigurationErrorIsSurfaced(t *testing.T) {
	next := newLeaser()
	next.Fail(sluice.ErrKeyConflict)
	l, err := fallback.New(next, fallback.WithBreaker(fallback.Breaker{Failures: 1, Cooldown: time.Minute, Probes: 1}))
	require.NoError(t, err)
	le, ok := sluice.As[ext.Leaser](l)
	require.True(t, ok)
	for range 3 {
		_, err := le.Lease(t.Context(), leaseReq)
		require.ErrorIs(t, err, sluice.ErrKeyConflict)
	}
	require.Equal(t, fallback.BreakerClosed, l.Stats().Breaker, "a configuration error does not trip the breaker")
}

func TestBadLeaseRequestsAreErrorsWithTheBreakerOpen(t *testing.T) {
	next := newLeaser()
	next.Fail(errors.New("connection refused"))
	l, err := fallback.New(next, fallback.WithBreaker(fallback.Breaker{Failures: 1, Cooldown: time.Minute, Probes: 1}))
	require.NoError(t, err)
	le, ok := sluice.As[ext.Leaser](l)
	require.True(t, ok)
	_, err = le.Lease(t.Context(), leaseReq)
	require.NoError(t, err, "the policy decided")
	require.Equal(t, fallback.BreakerOpen, l.Stats().Breaker)

	with := func(f func(r *ext.LeaseRequest)) ext.LeaseRequest {
		r := leaseReq
		f(&r)
		return r
	}
	for _, c := range []struct {
		name string
		req  ext.LeaseRequest
		want error
	}{
		{"no key", with(func(r *ext.LeaseRequest) { r.Key = "" }), sluice.ErrInvalidKey},
		{"no limit", with(func(r *ext.LeaseRequest) { r.Limit = sluice.Limit{} }), sluice.ErrInvalidLimit},
		{"negative cost", with(func(r *ext.LeaseRequest) { r.Cost = -1 }), sluice.ErrInvalidCost},
		{"cost above burst", with(func(r *ext.LeaseRequest) { r.Cost = limit.Burst + 1 }), sluice.ErrCostExceedsBurst},
		{"no holder", with(func(r *ext.LeaseRequest) { r.Holder = 0 }), sluice.ErrInvalidCost},
		{"negative holder", with(func(r *ext.LeaseRequest) { r.Holder = -3 }), sluice.ErrInvalidCost},
		{"negative extra", with(func(r *ext.LeaseRequest) { r.Extra = -1 }), sluice.ErrInvalidCost},
		{"huge extra", with(func(r *ext.LeaseRequest) { r.Extra = sluice.MaxBurst + 1 }), sluice.ErrInvalidCost},
		{"negative held", with(func(r *ext.LeaseRequest) { r.Held = -1 }), sluice.ErrInvalidCost},
		{"no hold", with(func(r *ext.LeaseRequest) { r.Hold = 0 }), sluice.ErrInvalidLimit},
		{"hold too short", with(func(r *ext.LeaseRequest) { r.Hold = ext.MinLeaseHold - time.Microsecond }), sluice.ErrInvalidLimit},
		{"hold too long", with(func(r *ext.LeaseRequest) { r.Hold = ext.MaxLeaseHold + time.Millisecond }), sluice.ErrInvalidLimit},
		{"hold not whole milliseconds", with(func(r *ext.LeaseRequest) { r.Hold = 1500 * time.Microsecond }), sluice.ErrInvalidLimit},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := le.Lease(t.Context(), c.req)
			require.ErrorIs(t, err, c.want)
			require.ErrorContains(t, err, "fallback: ")
		})
	}
	leases := len(next.Leases())
	require.Equal(t, 1, leases, "no bad request reached the store")
	for _, hold := range []time.Duration{ext.MinLeaseHold, ext.MaxLeaseHold} {
		_, err := le.Lease(t.Context(), with(func(r *ext.LeaseRequest) { r.Hold = hold }))
		require.NoError(t, err, "the bounds are valid holds")
	}
}

// batchLeaser serves batches of leases (besides AllowN): it records each
// batch, answers a take with all its Extra and a release with Remaining
// 7, fails every batch with fail, and with slow waits for the call's
// context to end.
type batchLeaser struct {
	sluicetest.AllowOnly
	mu      sync.Mutex
	fail    error
	slow    bool
	batches [][]ext.LeaseRequest
}

func (b *batchLeaser) LeaseBatch(ctx context.Context, reqs []ext.LeaseRequest) ([]ext.LeaseResult, error) {
	b.mu.Lock()
	b.batches = append(b.batches, slices.Clone(reqs))
	fail, slow := b.fail, b.slow
	b.mu.Unlock()
	if slow {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if fail != nil {
		return nil, fail
	}
	out := make([]ext.LeaseResult, len(reqs))
	for i, r := range reqs {
		if r.Release {
			out[i].Decision = sluice.Decision{Allowed: true, Limit: r.Limit, Remaining: 7}
		} else {
			out[i].Grant = ext.Grant{Decision: sluice.Decision{Allowed: true, Limit: r.Limit, Remaining: 3}, Extra: r.Extra, Expires: r.Hold}
		}
	}
	return out, nil
}

func (b *batchLeaser) set(fail error, slow bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fail, b.slow = fail, slow
}

func (b *batchLeaser) sent() [][]ext.LeaseRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.batches)
}

// TestALeaseBatchReleaseIsNeverThePolicys: in a batch of leases, the
// policy decides the takes the store cannot, never a release: a release
// whose batch failed at the store has the failure as its error; one whose
// batch the open breaker kept from the store still goes to it, alone with
// the batch's other releases, as Release does; a batch of releases alone
// goes within the time budget only, never through the breaker, and its
// failure is the call's error.
func TestALeaseBatchReleaseIsNeverThePolicys(t *testing.T) {
	next := &batchLeaser{}
	l, err := fallback.New(next, fallback.WithBreaker(fallback.Breaker{Failures: 2, Cooldown: time.Minute, Probes: 1}), fallback.WithTimeout(20*time.Millisecond))
	require.NoError(t, err)
	lb, ok := sluice.As[ext.LeaseBatcher](l)
	require.True(t, ok)
	release := ext.LeaseRequest{Key: "r", Limit: limit, Holder: 42, Release: true, Unspent: 3}
	mixed := []ext.LeaseRequest{leaseReq, release}
	freed := ext.Grant{Decision: sluice.Decision{Allowed: true, Limit: limit, Remaining: 7}}
	policy := ext.Grant{Decision: sluice.Decision{Allowed: true, Limit: limit, Source: sluice.SourceFallbackOpen}}

	// Healthy: one call, the store's answers.
	results, err := lb.LeaseBatch(t.Context(), mixed)
	require.NoError(t, err)
	require.Equal(t, freed, results[1].Grant)
	require.EqualValues(t, leaseReq.Extra, results[0].Extra)
	require.Len(t, next.sent(), 1)

	// The store fails: the policy decides the take; the release fails.
	refused := errors.New("dial tcp: connection refused")
	next.set(refused, false)
	for range 2 {
		results, err = lb.LeaseBatch(t.Context(), mixed)
		require.NoError(t, err)
		require.Equal(t, policy, results[0].Grant)
		require.NoError(t, results[0].Err)
		require.ErrorIs(t, results[1].Err, refused, "a release's failure is its error")
		require.Zero(t, results[1].Grant, "and it has no decision")
	}
	require.Len(t, next.sent(), 3)
	require.Equal(t, fallback.BreakerOpen, l.Stats().Breaker, "two failed batches opened the breaker")

	// The breaker is open: the take is the policy's, and the release goes
	// to the store alone.
	results, err = lb.LeaseBatch(t.Context(), mixed)
	require.NoError(t, err)
	require.Equal(t, policy, results[0].Grant)
	require.ErrorIs(t, results[1].Err, refused)
	require.Equal(t, []ext.LeaseRequest{release}, next.sent()[3], "the release alone")
	next.set(nil, false)
	results, err = lb.LeaseBatch(t.Context(), mixed)
	require.NoError(t, err)
	require.Equal(t, policy, results[0].Grant)
	require.Equal(t, ext.LeaseResult{Grant: freed}, results[1], "the store's answer")
	require.Equal(t, []ext.LeaseRequest{release}, next.sent()[4])
	require.Equal(t, fallback.BreakerOpen, l.Stats().Breaker, "a release does not move the breaker")

	// Releases alone go to the store with the breaker open, and their
	// failure, or the time budget's end, is the call's error.
	releases := []ext.LeaseRequest{release, {Key: "r2", Limit: limit, Holder: 42, Release: true}}
	results, err = lb.LeaseBatch(t.Context(), releases)
	require.NoError(t, err)
	require.Equal(t, []ext.LeaseResult{{Grant: freed}, {Grant: freed}}, results)
	next.set(refused, false)
	_, err = lb.LeaseBatch(t.Context(), releases)
	require.ErrorIs(t, err, refused)
	next.set(nil, true)
	_, err = lb.LeaseBatch(t.Context(), releases)
	require.ErrorIs(t, err, context.DeadlineExceeded, "within the time budget")
	require.Len(t, next.sent(), 8)
	require.Equal(t, fallback.BreakerOpen, l.Stats().Breaker)

	// A bad release is an error before anything is sent, as Release's.
	_, err = lb.LeaseBatch(t.Context(), []ext.LeaseRequest{leaseReq, {Key: "r", Limit: limit, Holder: 42, Release: true, Unspent: -1}})
	var reqErr *sluice.RequestError
	require.ErrorAs(t, err, &reqErr)
	require.Equal(t, 1, reqErr.Index)
	require.ErrorIs(t, err, sluice.ErrInvalidCost)
	require.Len(t, next.sent(), 8)
}

// TestLeaseRefusesARelease: a release request goes to Release or
// LeaseBatch; Lease refuses it, the policy deciding nothing.
func TestLeaseRefusesARelease(t *testing.T) {
	next := newLeaser()
	l, err := fallback.New(next)
	require.NoError(t, err)
	le, ok := sluice.As[ext.Leaser](l)
	require.True(t, ok)
	_, err = le.Lease(t.Context(), ext.LeaseRequest{Key: "k", Limit: limit, Holder: 42, Release: true, Unspent: 1})
	require.ErrorIs(t, err, sluice.ErrInvalidCost)
	require.Empty(t, next.Leases())
}
