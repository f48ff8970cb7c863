package sluiceotel_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/lease"
)

// TestLeaseHitsAreCounted: over a lease, the decisions spent from the
// lease's tokens are counted with sluice.source "lease", and the one that
// took the lease from the store with "store"; none is degraded. So a
// lease's hit rate is the ratio of the two.
func TestLeaseHitsAreCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb, err := tokenbucket.New(newMemStore(t))
		require.NoError(t, err)
		leased, err := lease.New(tb, lease.WithSize(10))
		require.NoError(t, err)
		defer func() { require.NoError(t, leased.Close()) }()
		l, _, reader := setup(t, leased)
		limit := sluice.Limit{Rate: 100, Period: time.Hour, Burst: 100}
		for range 8 {
			d, err := l.AllowN(t.Context(), "k", limit, 1)
			require.NoError(t, err)
			require.True(t, d.Allowed)
		}
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(t.Context(), &rm))
		bySource := map[string]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				require.NotEqual(t, "sluice.decisions.degraded", m.Name, "a lease's decision is not degraded")
				if m.Name != "sluice.decisions" {
					continue
				}
				for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
					source, _ := p.Attributes.Value("sluice.source")
					bySource[source.AsString()] += p.Value
				}
			}
		}
		require.Equal(t, map[string]int64{"store": 1, "lease": 7}, bySource)
	})
}
