package denycache_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/denycache"
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

// leaser denies every AllowN (for a second) and serves leases, recording
// every call.
type leaser struct {
	grant sluice.Grant
	freed sluice.Decision

	mu       sync.Mutex
	allows   int
	leases   []sluice.LeaseRequest
	releases []release
}

func (f *leaser) AllowN(_ context.Context, _ string, limit sluice.Limit, _ int64) (sluice.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.allows++
	return sluice.Decision{Limit: limit, RetryAfter: time.Second, ResetAfter: time.Second}, nil
}

func (f *leaser) Lease(_ context.Context, req sluice.LeaseRequest) (sluice.Grant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leases = append(f.leases, req)
	return f.grant, nil
}

func (f *leaser) Release(_ context.Context, key string, limit sluice.Limit, holder, unspent int64) (sluice.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releases = append(f.releases, release{key, limit, holder, unspent})
	return f.freed, nil
}

var leaseReq = sluice.LeaseRequest{Key: "k", Limit: limit, Holder: 42, Cost: 2, Extra: 5, Held: 1, Hold: 100 * time.Millisecond}

func TestOverAllowNOnlyEveryCapabilityIsUnsupported(t *testing.T) {
	l, err := denycache.New(allowOnly{})
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
	for _, want := range []string{"denycache", "allowOnly", "lease"} {
		require.ErrorContains(t, err, want)
	}
	_, err = l.Release(ctx, "k", limit, 42, 1)
	require.ErrorIs(t, err, sluice.ErrUnsupported)

	d, err := l.AllowN(ctx, "k", limit, 1)
	require.NoError(t, err)
	require.True(t, d.Allowed, "AllowN is served")
}

func TestLeaseAndReleaseReachTheLeaserUnchanged(t *testing.T) {
	next := &leaser{
		grant: sluice.Grant{Decision: sluice.Decision{Allowed: true, Limit: limit, Remaining: 3}, Extra: 5, Expires: 100 * time.Millisecond},
		freed: sluice.Decision{Allowed: true, Limit: limit, Remaining: 7},
	}
	l, err := denycache.New(next)
	require.NoError(t, err)
	require.Equal(t, sluice.CanLease, l.Capabilities())

	// A remembered denial of the same cost answers AllowN locally, but
	// never a lease.
	_, err = l.AllowN(t.Context(), "k", limit, 2)
	require.NoError(t, err)
	d, err := l.AllowN(t.Context(), "k", limit, 2)
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.Equal(t, 1, next.allows, "the second denial was local")
	require.Equal(t, 1, l.Len())

	g, err := l.Lease(t.Context(), leaseReq)
	require.NoError(t, err)
	require.Equal(t, next.grant, g)
	require.Equal(t, []sluice.LeaseRequest{leaseReq}, next.leases)
	require.Zero(t, l.Len(), "a lease that took tokens forgets the denials, as an allowed AllowN does")

	_, err = l.AllowN(t.Context(), "k", limit, 2)
	require.NoError(t, err)
	require.Equal(t, 1, l.Len())
	d, err = l.Release(t.Context(), "k", limit, 42, 3)
	require.NoError(t, err)
	require.Equal(t, next.freed, d)
	require.Equal(t, []release{{"k", limit, 42, 3}}, next.releases)
	require.Zero(t, l.Len(), "a release gives tokens back: the key's denials are forgotten")
}

func TestADeniedLeaseIsNotRemembered(t *testing.T) {
	next := &leaser{grant: sluice.Grant{Decision: sluice.Decision{Limit: limit, RetryAfter: time.Second}}}
	l, err := denycache.New(next)
	require.NoError(t, err)
	for range 3 {
		g, err := l.Lease(t.Context(), leaseReq)
		require.NoError(t, err)
		require.False(t, g.Allowed)
	}
	require.Len(t, next.leases, 3, "every lease reached the wrapped limiter")
	require.Zero(t, l.Len())
}
