package lease_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/lease"
)

// TestLeaseHitsSaySo: a decision the lease makes from the tokens it holds
// has Source lease, so that sluiceotel and sluice serve can count a
// lease's hits; the decision that took the lease from the store has
// Source store. Neither is degraded.
func TestLeaseHitsSaySo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb, err := tokenbucket.New(newMemStore(t))
		require.NoError(t, err)
		l, err := lease.New(tb, lease.WithSize(10))
		require.NoError(t, err)
		defer func() { require.NoError(t, l.Close()) }()
		limit := sluice.Limit{Rate: 100, Period: time.Hour, Burst: 100}
		var sources []sluice.Source
		for range 4 {
			d, err := l.AllowN(t.Context(), "k", limit, 1)
			require.NoError(t, err)
			require.True(t, d.Allowed)
			require.False(t, d.Degraded())
			sources = append(sources, d.Source)
		}
		require.Equal(t, []sluice.Source{sluice.SourceStore, sluice.SourceLease, sluice.SourceLease, sluice.SourceLease}, sources)
		require.Equal(t, "lease", sluice.SourceLease.String())
	})
}
