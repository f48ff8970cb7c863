package coalesce_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/coalesce"
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

var leaseReq = sluice.LeaseRequest{Key: "k", Limit: capLimit, Holder: 42, Cost: 2, Extra: 5, Held: 1, Hold: 100 * time.Millisecond}

func TestNewNeedsBatchesAndNamesBothLayers(t *testing.T) {
	_, err := coalesce.New(sluicetest.AllowOnly{})
	require.ErrorIs(t, err, sluice.ErrUnsupported)
	for _, want := range []string{"coalesce", "sluicetest.AllowOnly", "batch"} {
		require.ErrorContains(t, err, want)
	}
}

func TestOverBatchesOnlyEveryOtherCapabilityIsUnsupported(t *testing.T) {
	l, err := coalesce.New(batchOnly{})
	require.NoError(t, err)
	require.Equal(t, sluice.CanBatch, l.Capabilities())
	sluicetest.RequireUnsupported(t, l, "coalesce", "batchOnly")

	results, err := l.AllowBatch(t.Context(), []sluice.Request{{Key: "k", Limit: capLimit, N: 1}})
	require.NoError(t, err)
	require.True(t, results[0].Decision.Allowed, "batches are served")
}

func TestLeaseAndReleaseReachTheLeaserUnchanged(t *testing.T) {
	next := &sluicetest.RecordingLeaser{
		Next:  batchOnly{},
		Grant: sluice.Grant{Decision: sluice.Decision{Allowed: true, Limit: capLimit, Remaining: 3}, Extra: 5, Expires: 100 * time.Millisecond},
		Freed: sluice.Decision{Allowed: true, Limit: capLimit, Remaining: 7},
	}
	l, err := coalesce.New(next)
	require.NoError(t, err)
	require.Equal(t, sluice.CanBatch|sluice.CanLease, l.Capabilities())
	require.True(t, sluice.Supports(l, sluice.CanLease))

	next.RequireLeaseForwarded(t, l, leaseReq, 3)
	require.Equal(t, coalesce.Stats{}, l.Stats(), "leases are neither AllowN calls nor batches")
}
