package denycache_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/denycache"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/sluicetest"
)

// denyAll denies every request, for a second.
type denyAll struct{}

func (denyAll) AllowN(_ context.Context, _ string, limit sluice.Limit, _ int64) (sluice.Decision, error) {
	return sluice.Decision{Limit: limit, RetryAfter: time.Second, ResetAfter: time.Second}, nil
}

// newLeaser denies every AllowN (for a second) and serves leases,
// recording every call.
func newLeaser(grant ext.Grant, freed sluice.Decision) *sluicetest.RecordingLeaser {
	return &sluicetest.RecordingLeaser{Next: denyAll{}, Grant: grant, Freed: freed}
}

var leaseReq = ext.LeaseRequest{Key: "k", Limit: limit, Holder: 42, Cost: 2, Extra: 5, Held: 1, Hold: 100 * time.Millisecond}

func TestOverAllowNOnlyEveryCapabilityIsUnsupported(t *testing.T) {
	l, err := denycache.New(sluicetest.AllowOnly{})
	require.NoError(t, err)
	require.Empty(t, sluicetest.Capabilities(t, sluicetest.AllowOnly{}))
	require.Empty(t, sluicetest.Capabilities(t, l), "exactly what the wrapped limiter serves: nothing")
	requireNotClaimed(t, l)

	d, err := l.AllowN(t.Context(), "k", limit, 1)
	require.NoError(t, err)
	require.True(t, d.Allowed, "AllowN is served")
}

func TestLeaseAndReleaseReachTheLeaserUnchanged(t *testing.T) {
	next := newLeaser(
		ext.Grant{Decision: sluice.Decision{Allowed: true, Limit: limit, Remaining: 3}, Extra: 5, Expires: 100 * time.Millisecond},
		sluice.Decision{Allowed: true, Limit: limit, Remaining: 7},
	)
	l, err := denycache.New(next)
	require.NoError(t, err)
	requireNotClaimed(t, l)
	le, ok := sluice.As[ext.Leaser](l)
	require.True(t, ok)

	// A remembered denial of the same cost answers AllowN locally, but
	// never a lease.
	_, err = l.AllowN(t.Context(), "k", limit, 2)
	require.NoError(t, err)
	d, err := l.AllowN(t.Context(), "k", limit, 2)
	require.NoError(t, err)
	require.False(t, d.Allowed)
	require.Equal(t, 1, next.Allows(), "the second denial was local")
	require.Equal(t, 1, l.Stats().Keys)

	g, err := le.Lease(t.Context(), leaseReq)
	require.NoError(t, err)
	require.Equal(t, next.Grant, g)
	require.Equal(t, []ext.LeaseRequest{leaseReq}, next.Leases())
	require.Zero(t, l.Stats().Keys, "a lease that took tokens forgets the denials, as an allowed AllowN does")

	_, err = l.AllowN(t.Context(), "k", limit, 2)
	require.NoError(t, err)
	require.Equal(t, 1, l.Stats().Keys)
	d, err = le.Release(t.Context(), "k", limit, 42, 3)
	require.NoError(t, err)
	require.Equal(t, next.Freed, d)
	require.Equal(t, []sluicetest.ReleaseCall{{Key: "k", Limit: limit, Holder: 42, Unspent: 3}}, next.Releases())
	require.Zero(t, l.Stats().Keys, "a release gives tokens back: the key's denials are forgotten")

	// Checked last: Capabilities leases and releases through l too.
	require.Equal(t, []string{"lease"}, sluicetest.Capabilities(t, l))
	require.Equal(t, sluicetest.Capabilities(t, next), sluicetest.Capabilities(t, l),
		"exactly what the wrapped limiter serves")
}

// requireNotClaimed requires that l's own type implements exactly what it always
// serves (nothing): every other optional interface it serves only through
// sluice.As, when the limiter it wraps does.
func requireNotClaimed(t *testing.T, l sluice.Limiter) {
	t.Helper()
	require.Equal(t, []string(nil), sluicetest.OwnCapabilities(l), "%T", l)
}

func TestADeniedLeaseIsNotRemembered(t *testing.T) {
	next := newLeaser(ext.Grant{Decision: sluice.Decision{Limit: limit, RetryAfter: time.Second}}, sluice.Decision{})
	l, err := denycache.New(next)
	require.NoError(t, err)
	le, ok := sluice.As[ext.Leaser](l)
	require.True(t, ok)
	for range 3 {
		g, err := le.Lease(t.Context(), leaseReq)
		require.NoError(t, err)
		require.False(t, g.Allowed)
	}
	require.Len(t, next.Leases(), 3, "every lease reached the wrapped limiter")
	require.Zero(t, l.Stats().Keys)
}

// batchLeaser denies every AllowN (for a second) and serves batches of
// leases only: it records each batch and answers with results.
type batchLeaser struct {
	denyAll
	results []ext.LeaseResult
	batches [][]ext.LeaseRequest
}

func (b *batchLeaser) LeaseBatch(_ context.Context, reqs []ext.LeaseRequest) ([]ext.LeaseResult, error) {
	b.batches = append(b.batches, slices.Clone(reqs))
	return slices.Clone(b.results), nil
}

// TestLeaseBatchReachesTheLeaserAndForgetsAsLeaseDoes: every request of a
// batch of leases goes to the wrapped limiter, a remembered denial
// notwithstanding, and each lease that took tokens forgets its key's
// denials under its limit; a denied lease, one that took nothing and one
// that failed forget nothing.
func TestLeaseBatchReachesTheLeaserAndForgetsAsLeaseDoes(t *testing.T) {
	next := &batchLeaser{results: []ext.LeaseResult{
		{Grant: ext.Grant{Decision: sluice.Decision{Allowed: true, Limit: limit, Remaining: 3}, Extra: 5}},
		{Grant: ext.Grant{Decision: sluice.Decision{Limit: limit, RetryAfter: time.Second}}},
		{Grant: ext.Grant{Decision: sluice.Decision{Allowed: true, Limit: limit, Remaining: 9}}},
		{Err: sluice.ErrInvalidCost},
	}}
	l, err := denycache.New(next)
	require.NoError(t, err)
	requireNotClaimed(t, l)
	_, ok := sluice.As[ext.Leaser](l)
	require.False(t, ok, "batches of leases, not single leases")
	lb, ok := sluice.As[ext.LeaseBatcher](l)
	require.True(t, ok)

	keys := []string{"took", "denied", "nothing", "failed"}
	for _, k := range keys {
		d, err := l.AllowN(t.Context(), k, limit, 2)
		require.NoError(t, err)
		require.False(t, d.Allowed)
	}
	require.Equal(t, 4, l.Stats().Keys)

	reqs := make([]ext.LeaseRequest, len(keys))
	for i, k := range keys {
		reqs[i] = ext.LeaseRequest{Key: k, Limit: limit, Holder: int64(i + 1), Cost: 2, Extra: 5, Hold: time.Second}
	}
	reqs[2].Cost, reqs[2].Extra = 0, 0 // a lease that takes no token
	results, err := lb.LeaseBatch(t.Context(), reqs)
	require.NoError(t, err)
	require.Equal(t, next.results, results, "the results come back unchanged")
	require.Equal(t, [][]ext.LeaseRequest{reqs}, next.batches, "every request, remembered denials notwithstanding")
	require.Equal(t, 3, l.Stats().Keys, "only the lease that took tokens forgot its key's denials")
	d, err := l.AllowN(t.Context(), "denied", limit, 2)
	require.NoError(t, err)
	require.False(t, d.Allowed, "still remembered")
	require.Equal(t, 3, l.Stats().Keys)

	require.Equal(t, []string{"leasebatch"}, sluicetest.Capabilities(t, l))
}

// TestALeaseBatchReleaseForgetsAsReleaseDoes: a release in a batch of
// leases forgets its key's denials under every limit before it goes, as
// Release does, whatever its result; the batch's other requests forget as
// Lease does.
func TestALeaseBatchReleaseForgetsAsReleaseDoes(t *testing.T) {
	next := &batchLeaser{results: []ext.LeaseResult{
		{Grant: ext.Grant{Decision: sluice.Decision{Allowed: true, Limit: limit, Remaining: 8}}},
		{Err: sluice.ErrUnexpectedReply},
		{Grant: ext.Grant{Decision: sluice.Decision{Limit: limit, RetryAfter: time.Second}}},
	}}
	l, err := denycache.New(next)
	require.NoError(t, err)
	lb, ok := sluice.As[ext.LeaseBatcher](l)
	require.True(t, ok)

	other := sluice.PerMinute(10)
	for _, k := range []string{"released", "failed", "denied"} {
		for _, lim := range []sluice.Limit{limit, other} {
			d, err := l.AllowN(t.Context(), k, lim, 2)
			require.NoError(t, err)
			require.False(t, d.Allowed)
		}
	}
	require.Equal(t, 6, l.Stats().Keys)

	reqs := []ext.LeaseRequest{
		{Key: "released", Limit: limit, Holder: 1, Release: true, Unspent: 3},
		{Key: "failed", Limit: limit, Holder: 1, Release: true},
		{Key: "denied", Limit: limit, Holder: 1, Cost: 2, Hold: time.Second},
	}
	results, err := lb.LeaseBatch(t.Context(), reqs)
	require.NoError(t, err)
	require.Equal(t, next.results, results, "the results come back unchanged")
	require.Equal(t, [][]ext.LeaseRequest{reqs}, next.batches)
	require.Equal(t, 2, l.Stats().Keys, "both releases forgot their keys' denials, under both limits; the denied take forgot nothing")
	for _, lim := range []sluice.Limit{limit, other} {
		d, err := l.AllowN(t.Context(), "denied", lim, 2)
		require.NoError(t, err)
		require.False(t, d.Allowed, "still remembered")
	}
}
