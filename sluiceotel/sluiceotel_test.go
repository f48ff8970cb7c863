package sluiceotel_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
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

// newMemStore returns memstore.New(opts...), failing t on an error.
func newMemStore(t testing.TB, opts ...memstore.Option) *memstore.Store {
	t.Helper()
	s, err := memstore.New(opts...)
	require.NoError(t, err)
	return s
}

type scripted struct {
	d   sluice.Decision
	err error
}

func (s scripted) AllowN(context.Context, string, sluice.Limit, int64) (sluice.Decision, error) {
	return s.d, s.err
}

func setup(t *testing.T, next sluice.Limiter, opts ...sluiceotel.Option) (*sluiceotel.Limiter, *tracetest.InMemoryExporter, *sdkmetric.ManualReader) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	l, err := sluiceotel.New(next, append([]sluiceotel.Option{
		sluiceotel.WithTracerProvider(tp), sluiceotel.WithMeterProvider(mp),
		sluiceotel.WithAlgorithm("tokenbucket"), sluiceotel.WithPolicyName("per-client"),
	}, opts...)...)
	require.NoError(t, err)
	return l, spans, reader
}

func attrs(kvs []attribute.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

func TestSpansAndMetrics(t *testing.T) {
	tb, err := tokenbucket.New(newMemStore(t))
	require.NoError(t, err)
	l, spans, reader := setup(t, tb)
	limit := sluice.PerSecond(2)
	for range 3 {
		_, err := l.AllowN(t.Context(), "user:42", limit, 1)
		require.NoError(t, err)
	}

	got := spans.GetSpans()
	require.Len(t, got, 3)
	last := got[2]
	require.Equal(t, "sluice.decision", last.Name)
	a := attrs(last.Attributes)
	require.Equal(t, "denied", a["sluice.outcome"])
	require.Equal(t, "tokenbucket", a["sluice.algorithm"])
	require.Equal(t, "per-client", a["sluice.policy"])
	require.Equal(t, "store", a["sluice.source"])
	require.Equal(t, int64(0), a["sluice.remaining"])
	require.NotContains(t, a, "sluice.key", "never the key unless asked")
	require.Equal(t, codes.Unset, last.Status.Code, "a denial is not a span error")
	require.Equal(t, "allowed", attrs(got[0].Attributes)["sluice.outcome"])

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(t.Context(), &rm))
	counts := map[string]int64{}
	var histogramCount uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range data.DataPoints {
					outcome, _ := p.Attributes.Value("sluice.outcome")
					_, hasKey := p.Attributes.Value("sluice.key")
					require.False(t, hasKey, "metrics never carry the key")
					counts[m.Name+"/"+outcome.AsString()] += p.Value
				}
			case metricdata.Histogram[float64]:
				require.Equal(t, "s", m.Unit)
				for _, p := range data.DataPoints {
					histogramCount += p.Count
				}
			}
		}
	}
	require.Equal(t, map[string]int64{"sluice.decisions/allowed": 2, "sluice.decisions/denied": 1}, counts)
	require.Equal(t, uint64(3), histogramCount)
}

func TestErrorsAndDegradedDecisions(t *testing.T) {
	l, spans, _ := setup(t, scripted{err: errors.New("connection refused")}, sluiceotel.WithKeyAttribute())
	_, err := l.AllowN(t.Context(), "user:42", sluice.PerSecond(1), 1)
	require.Error(t, err)
	span := spans.GetSpans()[0]
	require.Equal(t, codes.Error, span.Status.Code)
	require.Equal(t, "error", attrs(span.Attributes)["sluice.outcome"])
	require.Equal(t, "user:42", attrs(span.Attributes)["sluice.key"], "recorded when asked")

	l2, _, reader2 := setup(t, scripted{d: sluice.Decision{Allowed: true, Source: sluice.SourceFallbackLocal}})
	for range 4 {
		_, err := l2.AllowN(t.Context(), "k", sluice.PerSecond(1), 1)
		require.NoError(t, err)
	}
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader2.Collect(t.Context(), &rm))
	var degraded int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "sluice.decisions.degraded" {
				for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
					source, _ := p.Attributes.Value("sluice.source")
					require.Equal(t, "fallback-local", source.AsString())
					degraded += p.Value
				}
			}
		}
	}
	require.Equal(t, int64(4), degraded)
}

func TestNilNext(t *testing.T) {
	_, err := sluiceotel.New(nil)
	require.Error(t, err)
}

func TestBadOptions(t *testing.T) {
	for _, c := range []struct {
		opt  sluiceotel.Option
		want string
	}{
		{nil, "sluiceotel: option 1 is nil"},
		{sluiceotel.WithTracerProvider(nil), "sluiceotel: WithTracerProvider(nil)"},
		{sluiceotel.WithMeterProvider(nil), "sluiceotel: WithMeterProvider(nil)"},
		{sluiceotel.WithAlgorithm(""), `sluiceotel: WithAlgorithm("")`},
		{sluiceotel.WithPolicyName(""), `sluiceotel: WithPolicyName("")`},
	} {
		_, err := sluiceotel.New(scripted{}, sluiceotel.WithKeyAttribute(), c.opt)
		require.ErrorContains(t, err, c.want)
	}
}

// BenchmarkOverhead: ns and allocs per decision of the token bucket on
// memstore, bare, with no-op providers and with the SDK (in-memory
// exporters).
//
//	go test -run '^$' -bench BenchmarkOverhead -benchtime 2s -count 3 ./sluiceotel/
func BenchmarkOverhead(b *testing.B) {
	limit := sluice.PerSecond(1_000_000).WithBurst(1_000_000_000)
	tb, err := tokenbucket.New(newMemStore(b))
	require.NoError(b, err)
	noop, err := sluiceotel.New(tb, sluiceotel.WithTracerProvider(tracenoop.NewTracerProvider()),
		sluiceotel.WithMeterProvider(metricnoop.NewMeterProvider()), sluiceotel.WithAlgorithm("tokenbucket"))
	require.NoError(b, err)
	sdk, err := sluiceotel.New(tb,
		sluiceotel.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))),
		sluiceotel.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))),
		sluiceotel.WithAlgorithm("tokenbucket"))
	require.NoError(b, err)
	for _, c := range []struct {
		name string
		l    sluice.Limiter
	}{{"bare", tb}, {"noop", noop}, {"sdk", sdk}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.l.AllowN(b.Context(), "k", limit, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
