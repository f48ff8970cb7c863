package fallback_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memstore"
)

var leaseReq = sluice.LeaseRequest{Key: "k", Limit: limit, Holder: 42, Cost: 2, Extra: 5, Held: 1, Hold: 100 * time.Millisecond}

// newLeaser serves leases, recording each lease and release; after Fail,
// every call fails.
func newLeaser() *sluicetest.RecordingLeaser {
	return &sluicetest.RecordingLeaser{
		Grant: sluice.Grant{Decision: sluice.Decision{Allowed: true, Limit: limit, Remaining: 3}, Extra: 5, Expires: 100 * time.Millisecond},
		Freed: sluice.Decision{Allowed: true, Limit: limit, Remaining: 7},
	}
}

func TestOverAllowNOnlyEveryCapabilityIsUnsupported(t *testing.T) {
	l, err := fallback.New(sluicetest.AllowOnly{})
	require.NoError(t, err)
	require.Equal(t, sluice.Capability(0), l.Capabilities())
	sluicetest.RequireUnsupported(t, l, "fallback", "sluicetest.AllowOnly")
	require.Equal(t, fallback.BreakerClosed, l.State(), "an unsupported call is no store failure")

	d, err := l.AllowN(t.Context(), "k", limit, 1)
	require.NoError(t, err)
	require.Equal(t, sluice.SourceStore, d.Source, "AllowN is served")
}

func TestLeaseAndReleaseReachTheLeaserUnchanged(t *testing.T) {
	next := newLeaser()
	l, err := fallback.New(next)
	require.NoError(t, err)
	require.Equal(t, sluice.CanLease, l.Capabilities())

	next.RequireLeaseForwarded(t, l, leaseReq, 3)
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
			next.Fail(errors.New("dial tcp: connection refused"))
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
			leases := len(next.Leases())
			require.Equal(t, 2, leases, "the breaker opened after 2 failed leases: no more calls")
			require.Equal(t, fallback.BreakerOpen, l.State())

			// A release is not the policy's: with the breaker open it
			// still goes to the store, and its failure is an error.
			_, err = l.Release(t.Context(), "k", limit, 42, 3)
			require.ErrorContains(t, err, "connection refused")
			releases := len(next.Releases())
			require.Equal(t, 1, releases)
		})
	}
}

func TestALeaseConfigurationErrorIsSurfaced(t *testing.T) {
	next := newLeaser()
	next.Fail(sluice.ErrKeyConflict)
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
	next.Fail(errors.New("connection refused"))
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
	leases := len(next.Leases())
	require.Equal(t, 1, leases, "no bad request reached the store")
	for _, hold := range []time.Duration{sluice.MinLeaseHold, sluice.MaxLeaseHold} {
		_, err := l.Lease(t.Context(), with(func(r *sluice.LeaseRequest) { r.Hold = hold }))
		require.NoError(t, err, "the bounds are valid holds")
	}
}
