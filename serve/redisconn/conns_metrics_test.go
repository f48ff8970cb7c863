package redisconn

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestObserveReportsTheCounts: each collection reads the counts at that
// instant, and Unregister ends the reports.
func TestObserveReportsTheCounts(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = meters.Shutdown(context.Background()) })
	conns := &Conns{}
	reg, err := conns.Observe(meters.Meter("test"))
	require.NoError(t, err)

	collect := func() map[string]int64 {
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(context.Background(), &rm))
		got := map[string]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				sum, ok := m.Data.(metricdata.Sum[int64])
				require.True(t, ok, "%s is a %T", m.Name, m.Data)
				for _, dp := range sum.DataPoints {
					got[m.Name] += dp.Value
				}
			}
		}
		return got
	}
	require.Equal(t, map[string]int64{"sluice.redis.connections.open": 0, "sluice.redis.connections.created": 0, "sluice.redis.connections.closed": 0}, collect())

	var tracked []net.Conn
	for range 3 {
		a, b := net.Pipe()
		t.Cleanup(func() { _ = b.Close() })
		tracked = append(tracked, conns.track(a))
	}
	require.NoError(t, tracked[0].Close())
	require.NoError(t, tracked[0].Close()) // counted once
	require.Equal(t, map[string]int64{"sluice.redis.connections.open": 2, "sluice.redis.connections.created": 3, "sluice.redis.connections.closed": 1}, collect())

	require.NoError(t, reg.Unregister())
	require.Empty(t, collect())
}
