package fallback_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/store/memstore"
)

// allowOnly serves AllowN and nothing else.
type allowOnly struct{}

func (allowOnly) AllowN(_ context.Context, _ string, limit sluice.Limit, _ int64) (sluice.Decision, error) {
	return sluice.Decision{Allowed: true, Limit: limit}, nil
}

// release is one call of Leaser.Release.
type release struct {
	key             string
	limit           sluice.Limit
	holder, unspent int64
}

// leaser serves leases, recording each lease and release; while err is
// set, every call fails with it.
type leaser struct {
	grant sluice.Grant
	freed sluice.Decision

	mu       sync.Mutex
	err      error
	leases   []sluice.LeaseRequest
	releases []release
}

func (f *leaser) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *leaser) calls() (leases, releases int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.leases), len(f.releases)
}

func (f *leaser) AllowN(_ context.Context, _ string, limit sluice.Limit, _ int64) (sluice.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sluice.Decision{Allowed: true, Limit: limit}, f.err
}

func (f *leaser) Lease(_ context.Context, req sluice.LeaseRequest) (sluice.Grant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leases = append(f.leases, req)
	if f.err != nil {
		return sluice.Grant{}, f.err
	}
	return f.grant, nil
}

func (f *leaser) Release(_ context.Context, key string, limit sluice.Limit, holder, unspent int64) (sluice.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releases = append(f.releases, release{key, limit, holder, unspent})
	if f.err != nil {
		return sluice.Decision{}, f.err
	}
	return f.freed, nil
}

var leaseReq = sluice.LeaseRequest{Key: "k", Limit: limit, Holder: 42, Cost: 2, Extra: 5, Held: 1, Hold: 100 * time.Millisecond}

func newLeaser() *leaser {
	return &leaser{
		grant: sluice.Grant{Decision: sluice.Decision{Allowed: true, Limit: limit, Remaining: 3}, Extra: 5, Expires: 100 * time.Millisecond},
		freed: sluice.Decision{Allowed: true, Limit: limit, Remaining: 7},
	}
}

func TestOverAllowNOnlyEveryCapabilityIsUnsupported(t *testing.T) {
	l, err := fallback.New(allowOnly{})
	require.NoError(t, err)
	require.Equal(t, sluice.Capability(0), l.Capabilities())
	ctx := t.Context()
	_, err = l.Refund(ctx, "k", limit, 1)
	require.ErrorIs(t, err, sluice.ErrUnsupported)
	require.ErrorIs(t, l.Reset(ctx, "k"), sluice.ErrUnsupported)
	_, err = l.AllowBatch(ctx, []sluice.Request{{Key: "k", Limit: limit, N: 1}})
	require.ErrorIs(t, err, sluice.ErrUnsupported)
	_, err = l.Capacity("k", limit)
	require.ErrorIs(t, err, sluice.ErrUnsupported)
	_, err = l.Lease(ctx, leaseReq)
	require.ErrorIs(t, err, sluice.ErrUnsupported)
	for _, want := range []string{"fallback", "allowOnly", "lease"} {
		require.ErrorContains(t, err, want)
	}
	_, err = l.Release(ctx, "k", limit, 42, 1)
	require.ErrorIs(t, err, sluice.ErrUnsupported)
	require.Equal(t, fallback.BreakerClosed, l.State(), "an unsupported call is no store failure")

	d, err := l.AllowN(ctx, "k", limit, 1)
	require.NoError(t, err)
	require.Equal(t, sluice.SourceStore, d.Source, "AllowN is served")
}

func TestLeaseAndReleaseReachTheLeaserUnchanged(t *testing.T) {
	next := newLeaser()
	l, err := fallback.New(next)
	require.NoError(t, err)
	require.Equal(t, sluice.CanLease, l.Capabilities())

	g, err := l.Lease(t.Context(), leaseReq)
	require.NoError(t, err)
	require.Equal(t, next.grant, g)
	d, err := l.Release(t.Context(), "k", limit, 42, 3)
	require.NoError(t, err)
	require.Equal(t, next.freed, d)

	require.Equal(t, []sluice.LeaseRequest{leaseReq}, next.leases)
	require.Equal(t, []release{{"k", limit, 42, 3}}, next.releases)
}

func TestAFailedLeaseIsDecidedByThePolicyAndLeasesNothing(t *testing.T) {
	local, err := tokenbucket.New(memstore.New())
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
			next.fail(errors.New("dial tcp: connection refused"))
			l, err := fallback.New(next, fallback.WithPolicy(c.policy), fallback.WithBreaker(2, time.Minute, 1))
			require.NoError(t, err)
			for i := range 4 {
				g, err := l.Lease(t.Context(), leaseReq)
				require.NoError(t, err)
				if i == 0 {
					require.Equal(t, sluice.Grant{Decision: c.want}, g, "the policy decides Cost; Extra and Expires are 0")
				}
				require.Zero(t, g.Extra)
				require.Zero(t, g.Expires)
				require.Equal(t, c.want.Source, g.Source)
			}
			leases, _ := next.calls()
			require.Equal(t, 2, leases, "the breaker opened after 2 failed leases: no more calls")
			require.Equal(t, fallback.BreakerOpen, l.State())

			// A release is not the policy's: with the breaker open it
			// still goes to the store, and its failure is an error.
			_, err = l.Release(t.Context(), "k", limit, 42, 3)
			require.ErrorContains(t, err, "connection refused")
			_, releases := next.calls()
			require.Equal(t, 1, releases)
		})
	}
}

func TestALeaseConfigurationErrorIsSurfaced(t *testing.T) {
	next := newLeaser()
	next.fail(sluice.ErrKeyConflict)
	l, err := fallback.New(next, fallback.WithBreaker(1, time.Minute, 1))
	require.NoError(t, err)
	for range 3 {
		_, err := l.Lease(t.Context(), leaseReq)
		require.ErrorIs(t, err, sluice.ErrKeyConflict)
	}
	require.Equal(t, fallback.BreakerClosed, l.State(), "a configuration error does not trip the breaker")
}

func TestBadLeaseRequestsAreErrorsWithTheBreakerOpen(t *testing.T) {
	next := newLeaser()
	next.fail(errors.New("connection refused"))
	l, err := fallback.New(next, fallback.WithBreaker(1, time.Minute, 1))
	require.NoError(t, err)
	_, err = l.Lease(t.Context(), leaseReq)
	require.NoError(t, err, "the policy decided")
	require.Equal(t, fallback.BreakerOpen, l.State())

	with := func(f func(r *sluice.LeaseRequest)) sluice.LeaseRequest {
		r := leaseReq
		f(&r)
		return r
	}
	for _, c := range []struct {
		name string
		req  sluice.LeaseRequest
		want error
	}{
		{"no key", with(func(r *sluice.LeaseRequest) { r.Key = "" }), sluice.ErrInvalidKey},
		{"no limit", with(func(r *sluice.LeaseRequest) { r.Limit = sluice.Limit{} }), sluice.ErrInvalidLimit},
		{"negative cost", with(func(r *sluice.LeaseRequest) { r.Cost = -1 }), sluice.ErrInvalidCost},
		{"cost above burst", with(func(r *sluice.LeaseRequest) { r.Cost = limit.Burst + 1 }), sluice.ErrCostExceedsBurst},
		{"no holder", with(func(r *sluice.LeaseRequest) { r.Holder = 0 }), sluice.ErrInvalidCost},
		{"negative holder", with(func(r *sluice.LeaseRequest) { r.Holder = -3 }), sluice.ErrInvalidCost},
		{"negative extra", with(func(r *sluice.LeaseRequest) { r.Extra = -1 }), sluice.ErrInvalidCost},
		{"huge extra", with(func(r *sluice.LeaseRequest) { r.Extra = sluice.MaxBurst + 1 }), sluice.ErrInvalidCost},
		{"negative held", with(func(r *sluice.LeaseRequest) { r.Held = -1 }), sluice.ErrInvalidCost},
		{"no hold", with(func(r *sluice.LeaseRequest) { r.Hold = 0 }), sluice.ErrInvalidLimit},
		{"hold too short", with(func(r *sluice.LeaseRequest) { r.Hold = sluice.MinLeaseHold - time.Microsecond }), sluice.ErrInvalidLimit},
		{"hold too long", with(func(r *sluice.LeaseRequest) { r.Hold = sluice.MaxLeaseHold + time.Millisecond }), sluice.ErrInvalidLimit},
		{"hold not whole milliseconds", with(func(r *sluice.LeaseRequest) { r.Hold = 1500 * time.Microsecond }), sluice.ErrInvalidLimit},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := l.Lease(t.Context(), c.req)
			require.ErrorIs(t, err, c.want)
			require.ErrorContains(t, err, "fallback: ")
		})
	}
	leases, _ := next.calls()
	require.Equal(t, 1, leases, "no bad request reached the store")
	for _, hold := range []time.Duration{sluice.MinLeaseHold, sluice.MaxLeaseHold} {
		_, err := l.Lease(t.Context(), with(func(r *sluice.LeaseRequest) { r.Hold = hold }))
		require.NoError(t, err, "the bounds are valid holds")
	}
}
