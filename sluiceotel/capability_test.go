package sluiceotel_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/coalesce"
	"github.com/sluicehq/sluice/denycache"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/sluiceotel"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memstore"
)

var (
	capLimit = sluice.PerSecond(10)
	leaseReq = sluice.LeaseRequest{Key: "user:42", Limit: capLimit, Holder: 42, Cost: 2, Extra: 5, Held: 1, Hold: 100 * time.Millisecond}
)

func TestOverAllowNOnlyEveryCapabilityIsUnsupported(t *testing.T) {
	l, _, _ := setup(t, scripted{d: sluice.Decision{Allowed: true}})
	require.Equal(t, sluice.Capability(0), l.Capabilities())
	sluicetest.RequireUnsupported(t, l, "sluiceotel", "scripted")

	d, err := l.AllowN(t.Context(), "k", capLimit, 1)
	require.NoError(t, err)
	require.True(t, d.Allowed, "AllowN is served")
}

func TestLeaseAndReleaseAreForwardedAndRecorded(t *testing.T) {
	next := &sluicetest.RecordingLeaser{
		Next:  scripted{},
		Grant: sluice.Grant{Decision: sluice.Decision{Allowed: true, Limit: capLimit, Remaining: 3}, Extra: 5, Expires: 100 * time.Millisecond},
		Freed: sluice.Decision{Allowed: true, Limit: capLimit, Remaining: 7},
	}
	l, spans, reader := setup(t, next, sluiceotel.WithKeyAttribute())
	require.Equal(t, sluice.CanLease, l.Capabilities())

	next.RequireLeaseForwarded(t, l, leaseReq, 3)

	got := spans.GetSpans()
	require.Len(t, got, 2)
	require.Equal(t, "sluice.lease", got[0].Name)
	a := attrs(got[0].Attributes)
	require.Equal(t, "allowed", a["sluice.outcome"])
	require.Equal(t, int64(2), a["sluice.cost"], "the request's Cost")
	require.Equal(t, int64(3), a["sluice.remaining"])
	require.Equal(t, int64(5), a["sluice.lease.extra"])
	require.Equal(t, "store", a["sluice.source"])
	require.Equal(t, "per-client", a["sluice.policy"])
	require.Equal(t, "user:42", a["sluice.key"])
	require.Equal(t, "sluice.release", got[1].Name)
	a = attrs(got[1].Attributes)
	require.Equal(t, int64(3), a["sluice.lease.unspent"])
	require.Equal(t, "tokenbucket", a["sluice.algorithm"])
	require.Equal(t, codes.Unset, got[1].Status.Code)

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(t.Context(), &rm))
	decisions := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "sluice.decisions" {
				for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
					outcome, _ := p.Attributes.Value("sluice.outcome")
					decisions[outcome.AsString()] += p.Value
				}
			}
		}
	}
	require.Equal(t, map[string]int64{"allowed": 1}, decisions, "the lease's decision counts; the release does not")

	// A failed release is a span error.
	next.FailReleases(errors.New("connection refused"))
	_, err := l.Release(t.Context(), "user:42", capLimit, 42, 3)
	require.ErrorContains(t, err, "connection refused")
	last := spans.GetSpans()[2]
	require.Equal(t, "sluice.release", last.Name)
	require.Equal(t, codes.Error, last.Status.Code)
}

// TestEveryCapabilityThroughTheWholeStack stacks every decorator over the
// token bucket, as docs/http.md suggests (sluiceotel outermost): each
// layer reports every capability, and each call made at the top goes
// through every layer to the bucket and back.
func TestEveryCapabilityThroughTheWholeStack(t *testing.T) {
	tb, err := tokenbucket.New(memstore.New())
	require.NoError(t, err)
	co, err := coalesce.New(tb)
	require.NoError(t, err)
	dc, err := denycache.New(co)
	require.NoError(t, err)
	fb, err := fallback.New(dc)
	require.NoError(t, err)
	l, spans, _ := setup(t, fb)
	for _, layer := range []sluice.Limiter{tb, co, dc, fb, l} {
		require.Equal(t, sluice.AllCapabilities, sluice.CapabilitiesOf(layer), "%T", layer)
	}

	ctx, key := t.Context(), "user:42"
	hourly := sluice.Limit{Rate: 10, Period: time.Hour, Burst: 10} // no refill during the test
	capacity, err := l.Capacity("k", hourly)
	require.NoError(t, err)
	require.Equal(t, hourly.Burst, capacity)
	d, err := l.AllowN(ctx, key, hourly, 4)
	require.NoError(t, err)
	require.EqualValues(t, 6, d.Remaining)
	d, err = l.Refund(ctx, key, hourly, 1)
	require.NoError(t, err)
	require.EqualValues(t, 7, d.Remaining)
	results, err := l.AllowBatch(ctx, []sluice.Request{{Key: key, Limit: hourly, N: 1}, {Key: key, Limit: hourly, N: 1}})
	require.NoError(t, err)
	require.EqualValues(t, 5, results[1].Decision.Remaining)
	require.NoError(t, l.Reset(ctx, key))

	req := sluice.LeaseRequest{Key: key, Limit: hourly, Holder: 7, Cost: 2, Extra: 3, Hold: time.Second}
	g, err := l.Lease(ctx, req)
	require.NoError(t, err)
	require.True(t, g.Allowed)
	require.Equal(t, sluice.SourceStore, g.Source)
	require.EqualValues(t, 3, g.Extra)
	require.EqualValues(t, 3, g.Reserved)
	require.EqualValues(t, 5, g.Remaining, "10 less the cost and the reservation")
	d, err = l.Release(ctx, key, hourly, 7, 3)
	require.NoError(t, err)
	require.EqualValues(t, 8, d.Remaining, "the unspent tokens are back")

	var names []string
	for _, s := range spans.GetSpans() {
		names = append(names, s.Name)
	}
	require.Equal(t, []string{"sluice.decision", "sluice.batch", "sluice.lease", "sluice.release"}, names)
}
