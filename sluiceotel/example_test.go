package sluiceotel_test

import (
	"context"
	"fmt"
	"slices"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/sluiceotel"
	"github.com/sluicehq/sluice/store/memstore"
)

// Each decision is a span and a count. Here the providers keep them in
// memory to print them; an application that configured OpenTelemetry once
// gives no provider option at all.
func Example() {
	ctx := context.Background()
	spans := tracetest.NewInMemoryExporter()
	reader := sdkmetric.NewManualReader()

	store, err := memstore.New() // in production: a Redis store
	if err != nil {
		panic(err)
	}
	tb, err := tokenbucket.New(store)
	if err != nil {
		panic(err)
	}
	limiter, err := sluiceotel.New(tb,
		sluiceotel.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))),
		sluiceotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
		sluiceotel.WithAlgorithm("tokenbucket"),
		sluiceotel.WithPolicyName("per-tenant"),
	)
	if err != nil {
		panic(err)
	}
	for range 3 {
		if _, err := limiter.AllowN(ctx, sluice.Key("tenant:42", "api"), sluice.PerMinute(2), 1); err != nil {
			panic(err)
		}
	}

	for _, s := range spans.GetSpans() {
		var outcome, remaining string
		for _, kv := range s.Attributes {
			switch kv.Key {
			case "sluice.outcome":
				outcome = kv.Value.String()
			case "sluice.remaining":
				remaining = kv.Value.String()
			}
		}
		fmt.Println(s.Name, outcome, "remaining", remaining)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	var counts []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "sluice.decisions" {
				for _, p := range sum.DataPoints {
					outcome, _ := p.Attributes.Value("sluice.outcome")
					policy, _ := p.Attributes.Value("sluice.policy")
					counts = append(counts, fmt.Sprintf("%s{outcome=%s,policy=%s} %d", m.Name, outcome.String(), policy.String(), p.Value))
				}
			}
		}
	}
	slices.Sort(counts)
	for _, c := range counts {
		fmt.Println(c)
	}

	// The decorator serves what the limiter it wraps serves.
	_, refunds := sluice.As[sluice.Refunder](limiter)
	_, resets := sluice.As[sluice.Resetter](limiter)
	_, batches := sluice.As[sluice.BatchLimiter](limiter)
	_, bounded := sluice.As[sluice.Bounded](limiter)
	fmt.Println("refund", refunds, "reset", resets, "batch", batches, "bound", bounded)
	// Output:
	// sluice.decision allowed remaining 1
	// sluice.decision allowed remaining 0
	// sluice.decision denied remaining 0
	// sluice.decisions{outcome=allowed,policy=per-tenant} 2
	// sluice.decisions{outcome=denied,policy=per-tenant} 1
	// refund true reset true batch true bound true
}

// With no-op providers the decorator records nothing and costs next to
// nothing, and decisions pass through unchanged.
func ExampleWithTracerProvider() {
	store, err := memstore.New()
	if err != nil {
		panic(err)
	}
	tb, err := tokenbucket.New(store)
	if err != nil {
		panic(err)
	}
	limiter, err := sluiceotel.New(tb,
		sluiceotel.WithTracerProvider(tracenoop.NewTracerProvider()),
		sluiceotel.WithMeterProvider(metricnoop.NewMeterProvider()),
	)
	if err != nil {
		panic(err)
	}
	d, err := limiter.AllowN(context.Background(), sluice.Key("tenant:42", "api"), sluice.PerMinute(10), 3)
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Allowed, d.Remaining, d.Source)
	// Output:
	// true 7 store
}
