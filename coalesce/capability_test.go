package coalesce_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/coalesce"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/sluicetest"
)

// batchOnly serves AllowN and AllowBatch: what coalesce needs, and no more.
type batchOnly struct{ sluicetest.AllowOnly }

func (batchOnly) AllowBatch(_ context.Context, reqs []sluice.Request) ([]sluice.Result, error) {
	out := make([]sluice.Result, len(reqs))
	for i, r := range reqs {
		out[i].Decision = sluice.Decision{Allowed: true, Limit: r.Limit}
	}
	return out, nil
}

var capLimit = sluice.PerSecond(10)

var leaseReq = ext.LeaseRequest{Key: "k", Limit: capLimit, Holder: 42, Cost: 2, Extra: 5, Held: 1, Hold: 100 * time.Millisecond}

func TestNewNeedsBatchesAndNamesBothLayers(t *testing.T) {
	_, err := coalesce.New(sluicetest.AllowOnly{})
	require.ErrorIs(t, err, sluice.ErrUnsupported)
	for _, want := range []string{"coalesce", "sluicetest.AllowOnly", "sluice.BatchLimiter"} {
		require.ErrorContains(t, err, want)
	}
	require.EqualError(t, err, "coalesce: sluice: the wrapped limiter does not support this: "+
		"coalesce cannot wrap sluicetest.AllowOnly, which is no sluice.BatchLimiter")
}

func TestOverBatchesOnlyEveryOtherCapabilityIsUnsupported(t *testing.T) {
	l, err := coalesce.New(batchOnly{})
	require.NoError(t, err)
	require.Equal(t, []string{"batch"}, sluicetest.Capabilities(t, batchOnly{}))
	require.Equal(t, sluicetest.Capabilities(t, batchOnly{}), sluicetest.Capabilities(t, l),
		"exactly what the wrapped limiter serves")
	requireNotClaimed(t, l)
	_, ok := sluice.As[sluice.Refunder](l)
	require.False(t, ok)
	_, ok = sluice.As[sluice.Resetter](l)
	require.False(t, ok)
	_, ok = sluice.As[sluice.Bounded](l)
	require.False(t, ok)
	_, ok = sluice.As[ext.Leaser](l)
	require.False(t, ok)
	_, ok = sluice.As[ext.LeaseBatcher](l)
	require.False(t, ok)

	results, err := l.AllowBatch(t.Context(), []sluice.Request{{Key: "k", Limit: capLimit, N: 1}})
	require.NoError(t, err)
	require.True(t, results[0].Decision.Allowed, "batches are served")
}

func TestLeaseAndReleaseReachTheLeaserUnchanged(t *testing.T) {
	next := &sluicetest.RecordingLeaser{
		Next:  batchOnly{},
		Grant: ext.Grant{Decision: sluice.Decision{Allowed: true, Limit: capLimit, Remaining: 3}, Extra: 5, Expires: 100 * time.Millisecond},
		Freed: sluice.Decision{Allowed: true, Limit: capLimit, Remaining: 7},
	}
	l, err := coalesce.New(next)
	require.NoError(t, err)
	requireNotClaimed(t, l)
	le, ok := sluice.As[ext.Leaser](l)
	require.True(t, ok)

	next.RequireLeaseForwarded(t, le, leaseReq, 3)
	require.Equal(t, coalesce.Stats{}, l.Stats(), "leases are neither AllowN calls nor batches")
	require.Zero(t, next.Allows(), "nor AllowN calls to the wrapped limiter")

	// Checked last: Capabilities leases and releases through l too.
	require.Equal(t, []string{"batch", "lease"}, sluicetest.Capabilities(t, l))
	require.Equal(t, sluicetest.Capabilities(t, next), sluicetest.Capabilities(t, l),
		"exactly what the wrapped limiter serves")
}

// requireNotClaimed requires that l's own type implements exactly what it always
// serves (batch): every other optional interface it serves only through
// sluice.As, when the limiter it wraps does.
func requireNotClaimed(t *testing.T, l sluice.Limiter) {
	t.Helper()
	require.Equal(t, []string{"batch"}, sluicetest.OwnCapabilities(l), "%T", l)
}

// batchLeaser takes batches of decisions and of leases, recording each
// batch of leases and answering it with results.
type batchLeaser struct {
	batchOnly
	results []ext.LeaseResult
	batches [][]ext.LeaseRequest
}

func (b *batchLeaser) LeaseBatch(_ context.Context, reqs []ext.LeaseRequest) ([]ext.LeaseResult, error) {
	b.batches = append(b.batches, slices.Clone(reqs))
	return slices.Clone(b.results), nil
}

// TestLeaseBatchReachesTheLeaserUnchanged: a batch of lease requests,
// takes and releases alike, reaches the leaser in one call, unchanged, and
// its results come back unchanged.
func TestLeaseBatchReachesTheLeaserUnchanged(t *testing.T) {
	next := &batchLeaser{results: []ext.LeaseResult{
		{Grant: ext.Grant{Decision: sluice.Decision{Allowed: true, Limit: capLimit, Remaining: 3}, Extra: 5, Expires: 100 * time.Millisecond}},
		{Err: sluice.ErrInvalidCost},
		{Grant: ext.Grant{Decision: sluice.Decision{Allowed: true, Limit: capLimit, Remaining: 9}}},
	}}
	l, err := coalesce.New(next)
	require.NoError(t, err)
	requireNotClaimed(t, l)
	_, ok := sluice.As[ext.Leaser](l)
	require.False(t, ok, "batches of leases, not single leases")
	lb, ok := sluice.As[ext.LeaseBatcher](l)
	require.True(t, ok)

	reqs := []ext.LeaseRequest{leaseReq, {Key: "k2", Limit: capLimit, Holder: 43, Cost: 1, Hold: time.Second},
		{Key: "k3", Limit: capLimit, Holder: 42, Release: true, Unspent: 4}}
	results, err := lb.LeaseBatch(t.Context(), reqs)
	require.NoError(t, err)
	require.Equal(t, next.results, results, "the results come back unchanged")
	require.Equal(t, [][]ext.LeaseRequest{reqs}, next.batches, "one call, the requests unchanged")
	require.Equal(t, coalesce.Stats{}, l.Stats(), "leases are neither AllowN calls nor batches")

	require.Equal(t, []string{"batch", "leasebatch"}, sluicetest.Capabilities(t, l))
}
