package redisconn

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/metric"
)

// Observe reports c's counts through meter at each collection, as three
// instruments (Prometheus names in parentheses):
//
//   - sluice.redis.connections.open, an up-down counter
//     (sluice_redis_connections_open): the connections not closed;
//   - sluice.redis.connections.created, a counter
//     (sluice_redis_connections_created_total);
//   - sluice.redis.connections.closed, a counter
//     (sluice_redis_connections_closed_total): closed by the client.
//
// A pool whose closed count climbs is losing connections (to the
// server's timeout, CLIENT KILL, failovers); open near the pool's size
// may mean calls wait for one. The registration lasts as long as the
// meter provider; Unregister ends it.
func (c *Conns) Observe(meter metric.Meter) (metric.Registration, error) {
	open, err := meter.Int64ObservableUpDownCounter("sluice.redis.connections.open",
		metric.WithDescription("Connections to the Redis servers holding the data, not yet closed."))
	if err != nil {
		return nil, fmt.Errorf("redisconn: %w", err)
	}
	created, err := meter.Int64ObservableCounter("sluice.redis.connections.created",
		metric.WithDescription("Connections made to the Redis servers holding the data."))
	if err != nil {
		return nil, fmt.Errorf("redisconn: %w", err)
	}
	closed, err := meter.Int64ObservableCounter("sluice.redis.connections.closed",
		metric.WithDescription("Connections to the Redis servers holding the data that the client closed."))
	if err != nil {
		return nil, fmt.Errorf("redisconn: %w", err)
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		n := c.Counts()
		o.ObserveInt64(open, int64(n.Open))
		o.ObserveInt64(created, int64(n.Created))
		o.ObserveInt64(closed, int64(n.Closed))
		return nil
	}, open, created, closed)
	if err != nil {
		return nil, fmt.Errorf("redisconn: %w", err)
	}
	return reg, nil
}
