package denycache_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/denycache"
	"github.com/sluicehq/sluice/sluicetest"
)

// denyAll denies every request, for a second.
type denyAll struct{}

func (denyAll) AllowN(_ context.Context, _ string, limit sluice.Limit, _ int64) (sluice.Decision, error) {
	return sluice.Decision{Limit: limit, RetryAfter: time.Second, ResetAfter: time.Second}, nil
}

// newLeaser denies every AllowN (for a second) and serves leases,
// recording every call.
func newLeaser(grant sluice.Grant, freed sluice.Decision) *sluicetest.RecordingLeaser {
	return &sluicetest.RecordingLeaser{Next: denyAll{}, Grant: grant, Freed: freed}
}

var leaseReq = sluice.LeaseRequest{Key: "k", Limit: limit, Holder: 42, Cost: 2, Extra: 5, Held: 1, Hold: 100 * time.Millisecond}

func TestOverAllowNOnlyEveryCapabilityIsUnsupported(t *testing.T) {
	l, err := denycache.New(sluicetest.AllowOnly{})
	require.NoError(t, err)
	require.Equal(t, sluice.Capability(0), l.Capabilities())
	sluicetest.RequireUnsupported(t, l, "denycache", "sluicetest.AllowOnly")

	d, err := l.AllowN(t.Context(), "k", limit, 1)
	require.NoError(t, err)
	require.True(t, d.Allowed, "AllowN is served")
}

func TestLeaseAndReleaseReachTheLeaserUnchanged(t *testing.T) {
	next := newLeaser(
		sluice.Grant{Decision: sluice.Decision{Allowed: true, Limit: limit, Remaining: 3}, Extra: 5, Expires: 100 * time.Millisecond},
		sluice.Decision{Allowed: true, Limit: limit, Remaining: 7},
	)
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
	require.Equal(t, 1, next.Allows(), "the second denial was local")
	require.Equal(t, 1, l.Len())

	g, err := l.Lease(t.Context(), leaseReq)
	require.NoError(t, err)
	require.Equal(t, next.Grant, g)
	require.Equal(t, []sluice.LeaseRequest{leaseReq}, next.Leases())
	require.Zero(t, l.Len(), "a lease that took tokens forgets the denials, as an allowed AllowN does")

	_, err = l.AllowN(t.Context(), "k", limit, 2)
	require.NoError(t, err)
	require.Equal(t, 1, l.Len())
	d, err = l.Release(t.Context(), "k", limit, 42, 3)
	require.NoError(t, err)
	require.Equal(t, next.Freed, d)
	require.Equal(t, []sluicetest.ReleaseCall{{Key: "k", Limit: limit, Holder: 42, Unspent: 3}}, next.Releases())
	require.Zero(t, l.Len(), "a release gives tokens back: the key's denials are forgotten")
}

func TestADeniedLeaseIsNotRemembered(t *testing.T) {
	next := newLeaser(sluice.Grant{Decision: sluice.Decision{Limit: limit, RetryAfter: time.Second}}, sluice.Decision{})
	l, err := denycache.New(next)
	require.NoError(t, err)
	for range 3 {
		g, err := l.Lease(t.Context(), leaseReq)
		require.NoError(t, err)
		require.False(t, g.Allowed)
	}
	require.Len(t, next.Leases(), 3, "every lease reached the wrapped limiter")
	require.Zero(t, l.Len())
}
