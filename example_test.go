package sluice_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/sluiceotel"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/store/embedded"
	"github.com/sluicehq/sluice/store/memstore"
)

func ExampleKey() {
	// One tenant's keys share a hash tag, so they live in one Redis
	// Cluster slot; braces in user input are escaped and cannot move it.
	fmt.Println(sluice.Key("tenant:42", "route", "orders"))
	fmt.Println(sluice.Key("evil}{", "x"))
	// Output:
	// rl:{tenant:42}:route:orders
	// rl:{evil%7D%7B}:x
}

func ExampleLimit_Validate() {
	fmt.Println(sluice.PerMinute(100).WithBurst(20).Validate())
	fmt.Println(sluice.Limit{Rate: 0, Period: 1}.Validate())
	// Output:
	// <nil>
	// sluice: invalid limit 0/1ns burst 0: rate must be at least 1
}

// The production stack for a busy API: the token bucket on Redis, leased
// so that most decisions are local, behind a fallback for when Redis
// fails, recorded in OpenTelemetry. Each layer serves what the one it
// wraps serves, but the lease layer does not lease to those above it.
func Example_stackBusyAPI() {
	ctx := context.Background()
	store, err := embedded.Start() // in production: goredisstore.New(client) or rueidisstore.New(client)
	if err != nil {
		panic(err)
	}
	defer store.Close()
	tb, err := tokenbucket.New(store)
	if err != nil {
		panic(err)
	}
	leased, err := lease.New(tb) // B = lease.DefaultSize, 100
	if err != nil {
		panic(err)
	}
	defer leased.Close() // gives back the unspent tokens
	guarded, err := fallback.New(leased,
		fallback.WithPolicy(fallback.Open()), // the default; Closed and Local are the others
		// The time budget of a store call. DefaultTimeout, 50 ms, suits a
		// healthy Redis; the example gives more, so that a loaded test
		// machine cannot make it fall back.
		fallback.WithTimeout(time.Second))
	if err != nil {
		panic(err)
	}
	reader := sdkmetric.NewManualReader() // to print the metrics; an application sets its providers once, globally
	limiter, err := sluiceotel.New(guarded,
		sluiceotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
		sluiceotel.WithAlgorithm("tokenbucket"))
	if err != nil {
		panic(err)
	}
	_, refunds := sluice.As[sluice.Refunder](limiter) // through every layer to the bucket
	_, leases := sluice.As[ext.Leaser](limiter)       // the lease layer keeps its leases
	fmt.Printf("the stack refunds: %v, leases: %v\n", refunds, leases)

	limit := sluice.PerSecond(1000)
	var allowed, estimated int
	for range 500 {
		d, err := limiter.AllowN(ctx, sluice.Key("tenant:42", "api"), limit, 1)
		if err != nil {
			panic(err)
		}
		if d.Allowed {
			allowed++
		}
		if d.Estimated { // decided from the lease
			estimated++
		}
	}
	fmt.Printf("%d allowed, %d estimated, fewer than 1 store call in 20: %v\n",
		allowed, estimated, leased.Stats().Requests < 500/20)

	// Redis goes away: a key without a lease cannot get one, and the
	// fallback policy decides.
	store.Close()
	d, err := limiter.AllowN(ctx, sluice.Key("tenant:43", "api"), limit, 1)
	if err != nil {
		panic(err)
	}
	fmt.Printf("allowed=%v source=%s degraded=%v\n", d.Allowed, d.Source, d.Degraded())

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	var counts []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, p := range sum.DataPoints {
					source, _ := p.Attributes.Value("sluice.source")
					counts = append(counts, fmt.Sprintf("%s{source=%s} %d", m.Name, source.String(), p.Value))
				}
			}
		}
	}
	slices.Sort(counts)
	for _, c := range counts {
		fmt.Println(c)
	}
	// Output:
	// the stack refunds: true, leases: false
	// 500 allowed, 500 estimated, fewer than 1 store call in 20: true
	// allowed=true source=fallback-open degraded=true
	// sluice.decisions.degraded{source=fallback-open} 1
	// sluice.decisions{source=fallback-open} 1
	// sluice.decisions{source=lease} 499
	// sluice.decisions{source=store} 1
}

// A hot tenant on Redis Cluster, declared as a stack.Spec (as a policy
// file of httplimit or sluice serve declares it): its keys are sharded
// over four sub-keys in four parts of the slot range, each share is
// leased, and a fallback guards the stack. stack.Build puts the shard
// outside the lease, so one process reaches every share. Other tenants'
// keys are neither sharded nor leased.
func Example_stackHotTenant() {
	ctx := context.Background()
	store, err := memstore.New() // in production: a store on a redis.ClusterClient
	if err != nil {
		panic(err)
	}
	limiter, err := stack.Build(stack.Spec{
		Rate: 400, Period: stack.Duration(time.Second), // a share: 100 per second
		Lease: 10, Shards: 4, HotKeys: []string{"tenant:42"}, Fallback: "open",
	}, store)
	if err != nil {
		panic(err)
	}
	defer limiter.Close()
	fmt.Println(limiter.Layers())

	for _, key := range []string{sluice.Key("tenant:42", "api"), sluice.Key("tenant:43", "api")} {
		for range 3 {
			d, err := limiter.Allow(ctx, key)
			if err != nil {
				panic(err)
			}
			fmt.Printf("%s allowed=%v estimated=%v limit=%s\n", key, d.Allowed, d.Estimated, d.Limit)
		}
	}
	// Output:
	// [fallback shard lease tokenbucket]
	// rl:{tenant:42}:api allowed=true estimated=true limit=400/1s burst 400
	// rl:{tenant:42}:api allowed=true estimated=true limit=400/1s burst 400
	// rl:{tenant:42}:api allowed=true estimated=true limit=400/1s burst 400
	// rl:{tenant:43}:api allowed=true estimated=false limit=400/1s burst 400
	// rl:{tenant:43}:api allowed=true estimated=false limit=400/1s burst 400
	// rl:{tenant:43}:api allowed=true estimated=false limit=400/1s burst 400
}
