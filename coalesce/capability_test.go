package coalesce_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/coalesce"
)

// allowOnly serves AllowN and nothing else.
type allowOnly struct{}

func (allowOnly) AllowN(_ context.Context, _ string, limit sluice.Limit, _ int64) (sluice.Decision, error) {
	return sluice.Decision{Allowed: true, Limit: limit}, nil
}

// batchOnly serves AllowN and AllowBatch: what coalesce needs, and no more.
type batchOnly struct{ allowOnly }

func (batchOnly) AllowBatch(_ context.Context, reqs []sluice.Request) ([]sluice.Result, error) {
	out := make([]sluice.Result, len(reqs))
	for i, r := range reqs {
		out[i].Decision = sluice.Decision{Allowed: true, Limit: r.Limit}
	}
	return out, nil
}

// release is one call of Leaser.Release.
type release struct {
	key             string
	limit           sluice.Limit
	holder, unspent int64
}

// leaser takes batches and leases, recording each lease and release.
type leaser struct {
	batchOnly
	grant sluice.Grant
	freed sluice.Decision

	mu       sync.Mutex
	leases   []sluice.LeaseRequest
	releases []release
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

var capLimit = sluice.PerSecond(10)

var leaseReq = sluice.LeaseRequest{Key: "k", Limit: capLimit, Holder: 42, Cost: 2, Extra: 5, Held: 1, Hold: 100 * time.Millisecond}

func TestNewNeedsBatchesAndNamesBothLayers(t *testing.T) {
	_, err := coalesce.New(allowOnly{})
	require.ErrorIs(t, err, sluice.ErrUnsupported)
	for _, want := range []string{"coalesce", "allowOnly", "batch"} {
		require.ErrorContains(t, err, want)
	}
}

func TestOverBatchesOnlyEveryOtherCapabilityIsUnsupported(t *testing.T) {
	l, err := coalesce.New(batchOnly{})
	require.NoError(t, err)
	require.Equal(t, sluice.CanBatch, l.Capabilities())
	ctx := t.Context()
	_, err = l.Refund(ctx, "k", capLimit, 1)
	require.ErrorIs(t, err, sluice.ErrUnsupported)
	require.ErrorIs(t, l.Reset(ctx, "k"), sluice.ErrUnsupported)
	_, err = l.Capacity("k", capLimit)
	require.ErrorIs(t, err, sluice.ErrUnsupported)
	_, err = l.Lease(ctx, leaseReq)
	require.ErrorIs(t, err, sluice.ErrUnsupported)
	require.ErrorContains(t, err, "coalesce")
	_, err = l.Release(ctx, "k", capLimit, 42, 1)
	require.ErrorIs(t, err, sluice.ErrUnsupported)

	results, err := l.AllowBatch(ctx, []sluice.Request{{Key: "k", Limit: capLimit, N: 1}})
	require.NoError(t, err)
	require.True(t, results[0].Decision.Allowed, "batches are served")
}

func TestLeaseAndReleaseReachTheLeaserUnchanged(t *testing.T) {
	next := &leaser{
		grant: sluice.Grant{Decision: sluice.Decision{Allowed: true, Limit: capLimit, Remaining: 3}, Extra: 5, Expires: 100 * time.Millisecond},
		freed: sluice.Decision{Allowed: true, Limit: capLimit, Remaining: 7},
	}
	l, err := coalesce.New(next)
	require.NoError(t, err)
	require.Equal(t, sluice.CanBatch|sluice.CanLease, l.Capabilities())
	require.True(t, sluice.Supports(l, sluice.CanLease))

	g, err := l.Lease(t.Context(), leaseReq)
	require.NoError(t, err)
	require.Equal(t, next.grant, g)
	d, err := l.Release(t.Context(), "k", capLimit, 42, 3)
	require.NoError(t, err)
	require.Equal(t, next.freed, d)

	require.Equal(t, []sluice.LeaseRequest{leaseReq}, next.leases)
	require.Equal(t, []release{{"k", capLimit, 42, 3}}, next.releases)
	require.Equal(t, coalesce.Stats{}, l.Stats(), "leases are neither AllowN calls nor batches")
}
