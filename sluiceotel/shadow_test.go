package sluiceotel_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/ext"
)

// TestShadowDecisionsCarryTheShadowAttribute: a decision under
// ext.WithShadow keeps its outcome and gains sluice.shadow=true on its span
// and on every metric; a decision without it has no sluice.shadow.
func TestShadowDecisionsCarryTheShadowAttribute(t *testing.T) {
	tb, err := tokenbucket.New(newMemStore(t))
	require.NoError(t, err)
	l, spans, reader := setup(t, tb)
	limit := sluice.PerSecond(1)
	_, err = l.AllowN(t.Context(), "k", limit, 1) // allowed, not shadow
	require.NoError(t, err)
	d, err := l.AllowN(ext.WithShadow(t.Context()), "k", limit, 1) // denied, shadow
	require.NoError(t, err)
	require.False(t, d.Allowed, "the mark does not change the decision")

	got := spans.GetSpans()
	require.Len(t, got, 2)
	require.NotContains(t, attrs(got[0].Attributes), "sluice.shadow")
	shadow := attrs(got[1].Attributes)
	require.Equal(t, true, shadow["sluice.shadow"])
	require.Equal(t, "denied", shadow["sluice.outcome"])

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(t.Context(), &rm))
	seen := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range data.DataPoints {
					outcome, _ := p.Attributes.Value("sluice.outcome")
					sh, ok := p.Attributes.Value("sluice.shadow")
					seen[m.Name+"/"+outcome.AsString()+"/"+describe(ok, sh.AsBool())] = true
				}
			case metricdata.Histogram[float64]:
				for _, p := range data.DataPoints {
					outcome, _ := p.Attributes.Value("sluice.outcome")
					sh, ok := p.Attributes.Value("sluice.shadow")
					seen[m.Name+"/"+outcome.AsString()+"/"+describe(ok, sh.AsBool())] = true
				}
			}
		}
	}
	require.Equal(t, map[string]bool{
		"sluice.decisions/allowed/none":          true,
		"sluice.decisions/denied/shadow":         true,
		"sluice.decision.duration/allowed/none":  true,
		"sluice.decision.duration/denied/shadow": true,
	}, seen)
}

func describe(present, v bool) string {
	switch {
	case !present:
		return "none"
	case v:
		return "shadow"
	default:
		return "false"
	}
}
