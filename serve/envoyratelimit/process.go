package envoyratelimit

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// The metrics envoyproxy/ratelimit's process exports besides its
// service's, named as its statsd exporter names gostats' stats it has no
// mapping for (escapeName: ratelimit.go.heapAlloc is
// ratelimit_go_heapAlloc), a gostats counter a Prometheus counter without
// a _total suffix, a gauge a gauge.

// RedisPoolCounts are the counts of envoyproxy/ratelimit's Redis pool
// stats (src/redis/driver_impl.go, scope redis_pool).
type RedisPoolCounts struct {
	Active     uint64 // connections open: ratelimit_redis_pool_cx_active
	Total      uint64 // connections made: ratelimit_redis_pool_cx_total
	LocalClose uint64 // connections closed by the client: ratelimit_redis_pool_cx_local_close
}

// NewRedisPoolCollector returns the collector of
// ratelimit_redis_pool_cx_active (a gauge),
// ratelimit_redis_pool_cx_total and ratelimit_redis_pool_cx_local_close
// (counters), read from counts at each collection. counts must be safe
// for concurrent use, and its Total and LocalClose must never go down.
// envoyproxy/ratelimit exports a counter once it moved; this collector
// exports every one from the start, at 0 until it moves.
func NewRedisPoolCollector(counts func() RedisPoolCounts) prometheus.Collector {
	return &redisPoolCollector{
		counts:     counts,
		active:     prometheus.NewDesc("ratelimit_redis_pool_cx_active", help, nil, nil),
		total:      prometheus.NewDesc("ratelimit_redis_pool_cx_total", help, nil, nil),
		localClose: prometheus.NewDesc("ratelimit_redis_pool_cx_local_close", help, nil, nil),
	}
}

type redisPoolCollector struct {
	counts                    func() RedisPoolCounts
	active, total, localClose *prometheus.Desc
}

func (c *redisPoolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.active
	ch <- c.total
	ch <- c.localClose
}

func (c *redisPoolCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.counts()
	ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, float64(n.Active))
	ch <- prometheus.MustNewConstMetric(c.total, prometheus.CounterValue, float64(n.Total))
	ch <- prometheus.MustNewConstMetric(c.localClose, prometheus.CounterValue, float64(n.LocalClose))
}

// runtimeStat is one of gostats' runtime stats (runtime.go,
// NewRuntimeStats, on envoyproxy/ratelimit's scope "go").
type runtimeStat struct {
	name  string
	typ   prometheus.ValueType
	value func(*runtime.MemStats) uint64
}

// runtimeStats are gostats' runtime stats, valued as its GenerateStats
// values them, but for lookups: gostats declares that counter and never
// sets it, so that it is never flushed, and never exported.
var runtimeStats = []runtimeStat{
	{"alloc", prometheus.GaugeValue, func(m *runtime.MemStats) uint64 { return m.Alloc }},
	{"totalAlloc", prometheus.CounterValue, func(m *runtime.MemStats) uint64 { return m.TotalAlloc }},
	{"sys", prometheus.GaugeValue, func(m *runtime.MemStats) uint64 { return m.Sys }},
	{"mallocs", prometheus.CounterValue, func(m *runtime.MemStats) uint64 { return m.Mallocs }},
	{"frees", prometheus.CounterValue, func(m *runtime.MemStats) uint64 { return m.Frees }},
	{"heapAlloc", prometheus.GaugeValue, func(m *runtime.MemStats) uint64 { return m.HeapAlloc }},
	{"heapSys", prometheus.GaugeValue, func(m *runtime.MemStats) uint64 { return m.HeapSys }},
	{"heapIdle", prometheus.GaugeValue, func(m *runtime.MemStats) uint64 { return m.HeapIdle }},
	{"heapInuse", prometheus.GaugeValue, func(m *runtime.MemStats) uint64 { return m.HeapInuse }},
	{"heapReleased", prometheus.GaugeValue, func(m *runtime.MemStats) uint64 { return m.HeapReleased }},
	{"heapObjects", prometheus.GaugeValue, func(m *runtime.MemStats) uint64 { return m.HeapObjects }},
	{"nextGC", prometheus.GaugeValue, func(m *runtime.MemStats) uint64 { return m.NextGC }},
	{"lastGC", prometheus.GaugeValue, func(m *runtime.MemStats) uint64 { return m.LastGC }},
	{"pauseTotalNs", prometheus.CounterValue, func(m *runtime.MemStats) uint64 { return m.PauseTotalNs }},
	{"numGC", prometheus.CounterValue, func(m *runtime.MemStats) uint64 { return uint64(m.NumGC) }},
	{"gcCPUPercent", prometheus.GaugeValue, func(m *runtime.MemStats) uint64 { return uint64(m.GCCPUFraction * 100) }},
	{"numGoroutine", prometheus.GaugeValue, func(*runtime.MemStats) uint64 { return uint64(runtime.NumGoroutine()) }},
}

// NewRuntimeCollector returns the collector of gostats' runtime stats as
// envoyproxy/ratelimit exports them, ratelimit_go_<stat>: the gauges
// alloc, sys, heapAlloc, heapSys, heapIdle, heapInuse, heapReleased,
// heapObjects, nextGC, lastGC, gcCPUPercent (the percentage of CPU time
// spent in GC, truncated to an integer) and numGoroutine, and the
// counters totalAlloc, mallocs, frees, pauseTotalNs and numGC, each the
// runtime.MemStats field of its name (runtime.NumGoroutine for
// numGoroutine), read at each collection (envoyproxy/ratelimit's at each
// STATS_FLUSH_INTERVAL). Each collection reads runtime.MemStats once,
// which stops the world briefly, as gostats' flush does.
func NewRuntimeCollector() prometheus.Collector {
	c := &runtimeCollector{}
	for _, s := range runtimeStats {
		c.descs = append(c.descs, prometheus.NewDesc("ratelimit_go_"+s.name, help, nil, nil))
	}
	return c
}

type runtimeCollector struct{ descs []*prometheus.Desc }

func (c *runtimeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *runtimeCollector) Collect(ch chan<- prometheus.Metric) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	for i, s := range runtimeStats {
		ch <- prometheus.MustNewConstMetric(c.descs[i], s.typ, float64(s.value(&m)))
	}
}
