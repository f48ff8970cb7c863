package sluiceotel_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/coalesce"
	"github.com/sluicehq/sluice/denycache"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/sluiceotel"
	"github.com/sluicehq/sluice/sluicetest"
)

var (
	capLimit = sluice.PerSecond(10)
	leaseReq = ext.LeaseRequest{Key: "user:42", Limit: capLimit, Holder: 42, Cost: 2, Extra: 5, Held: 1, Hold: 100 * time.Millisecond}
)

func TestOverAllowNOnlyEveryCapabilityIsUnsupported(t *testing.T) {
	next := scripted{d: sluice.Decision{Allowed: true}}
	l, _, _ := setup(t, next)
	require.Empty(t, sluicetest.Capabilities(t, next))
	require.Empty(t, sluicetest.Capabilities(t, l), "exactly what the wrapped limiter serves: nothing")
	requireNotClaimed(t, l)

	d, err := l.AllowN(t.Context(), "k", capLimit, 1)
	require.NoError(t, err)
	require.True(t, d.Allowed, "AllowN is served")
}

func TestLeaseAndReleaseAreForwardedAndRecorded(t *testing.T) {
	next := &sluicetest.RecordingLeaser{
		Next:  scripted{},
		Grant: ext.Grant{Decision: sluice.Decision{Allowed: true, Limit: capLimit, Remaining: 3}, Extra: 5, Expires: 100 * time.Millisecond},
		Freed: sluice.Decision{Allowed: true, Limit: capLimit, Remaining: 7},
	}
	l, spans, reader := setup(t, next, sluiceotel.WithKeyAttribute())
	requireNotClaimed(t, l)
	le, ok := sluice.As[ext.Leaser](l)
	require.True(t, ok)

	next.RequireLeaseForwarded(t, le, leaseReq, 3)

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

	require.Equal(t, map[string]int64{"allowed": 1}, decisionCounts(t, reader), "the lease's decision counts; the release does not")

	// A failed release is a span error.
	next.FailReleases(errors.New("connection refused"))
	_, err := le.Release(t.Context(), "user:42", capLimit, 42, 3)
	require.ErrorContains(t, err, "connection refused")
	require.Len(t, spans.GetSpans(), 3)
	last := spans.GetSpans()[2]
	require.Equal(t, "sluice.release", last.Name)
	require.Equal(t, codes.Error, last.Status.Code)

	// On a limiter of its own: Capabilities leases and releases too.
	other := &sluicetest.RecordingLeaser{Next: scripted{}}
	ol, _, _ := setup(t, other)
	require.Equal(t, []string{"lease"}, sluicetest.Capabilities(t, ol))
	require.Equal(t, sluicetest.Capabilities(t, other), sluicetest.Capabilities(t, ol),
		"exactly what the wrapped limiter serves")
}

// batchLeaser serves batches of leases only (besides AllowN): it records
// each batch it is asked, with the span its context carries, and answers
// with results, or fails with err.
type batchLeaser struct {
	scripted
	results []ext.LeaseResult
	err     error

	mu      sync.Mutex
	batches [][]ext.LeaseRequest
	parents []trace.SpanContext
}

func (b *batchLeaser) LeaseBatch(ctx context.Context, reqs []ext.LeaseRequest) ([]ext.LeaseResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.batches = append(b.batches, slices.Clone(reqs))
	b.parents = append(b.parents, trace.SpanContextFromContext(ctx))
	if b.err != nil {
		return nil, b.err
	}
	return slices.Clone(b.results), nil
}

// TestLeaseBatchIsForwardedAndRecorded: a batch of leases reaches the
// wrapped limiter unchanged, in one call under one "sluice.lease_batch"
// span, its results come back unchanged, and each request's decision is
// counted as a Lease's is.
func TestLeaseBatchIsForwardedAndRecorded(t *testing.T) {
	reqs := []ext.LeaseRequest{
		leaseReq,
		{Key: "user:43", Limit: capLimit, Holder: 43, Cost: 1, Extra: 2, Hold: time.Second},
		{Key: "user:44", Limit: capLimit, Holder: 44, Cost: 1, Hold: time.Second},
	}
	next := &batchLeaser{results: []ext.LeaseResult{
		{Grant: ext.Grant{Decision: sluice.Decision{Allowed: true, Limit: capLimit, Remaining: 3}, Extra: 5, Expires: 100 * time.Millisecond}},
		{Grant: ext.Grant{Decision: sluice.Decision{Limit: capLimit, RetryAfter: time.Second}}},
		{Err: sluice.ErrInvalidCost},
	}}
	l, spans, reader := setup(t, next)
	requireNotClaimed(t, l)
	_, ok := sluice.As[ext.Leaser](l)
	require.False(t, ok, "batches of leases, not single leases")
	lb, ok := sluice.As[ext.LeaseBatcher](l)
	require.True(t, ok)

	results, err := lb.LeaseBatch(t.Context(), reqs)
	require.NoError(t, err)
	require.Equal(t, next.results, results, "the results come back unchanged")
	require.Equal(t, [][]ext.LeaseRequest{reqs}, next.batches, "one call, the requests unchanged")

	got := spans.GetSpans()
	require.Len(t, got, 1)
	require.Equal(t, "sluice.lease_batch", got[0].Name)
	require.Equal(t, got[0].SpanContext, next.parents[0], "the wrapped limiter is called inside the span")
	a := attrs(got[0].Attributes)
	require.Equal(t, int64(3), a["sluice.batch.size"])
	require.Equal(t, "tokenbucket", a["sluice.algorithm"])
	require.Equal(t, "per-client", a["sluice.policy"])
	require.Equal(t, codes.Unset, got[0].Status.Code, "a denial or a request's own error is not the batch's")
	require.Equal(t, map[string]int64{"allowed": 1, "denied": 1, "error": 1}, decisionCounts(t, reader),
		"each request's decision counts, as a Lease's does")

	// A batch that fails is one error, in the span and in the metrics.
	next.err = errors.New("connection refused")
	_, err = lb.LeaseBatch(t.Context(), reqs)
	require.ErrorContains(t, err, "connection refused")
	got = spans.GetSpans()
	require.Len(t, got, 2)
	require.Equal(t, "sluice.lease_batch", got[1].Name)
	require.Equal(t, codes.Error, got[1].Status.Code)
	require.Equal(t, map[string]int64{"allowed": 1, "denied": 1, "error": 2}, decisionCounts(t, reader))
	next.err = nil

	// On a limiter of its own: Capabilities leases through it too.
	other := &batchLeaser{results: []ext.LeaseResult{{}}}
	ol, _, _ := setup(t, other)
	require.Equal(t, []string{"leasebatch"}, sluicetest.Capabilities(t, ol))
	require.Equal(t, sluicetest.Capabilities(t, other), sluicetest.Capabilities(t, ol),
		"exactly what the wrapped limiter serves")
}

// TestALeaseBatchReleaseIsNotADecision: the releases in a batch of leases
// are forwarded but not counted in the metrics, as Release is not, and a
// failed batch of releases alone counts nothing; a failed batch with a
// take counts one error, as before.
func TestALeaseBatchReleaseIsNotADecision(t *testing.T) {
	take := ext.LeaseRequest{Key: "user:43", Limit: capLimit, Holder: 43, Cost: 1, Extra: 2, Hold: time.Second}
	releases := []ext.LeaseRequest{
		{Key: "user:44", Limit: capLimit, Holder: 44, Release: true, Unspent: 3},
		{Key: "user:45", Limit: capLimit, Holder: 45, Release: true},
	}
	next := &batchLeaser{results: []ext.LeaseResult{
		{Grant: ext.Grant{Decision: sluice.Decision{Allowed: true, Limit: capLimit, Remaining: 3}, Extra: 2, Expires: time.Second}},
		{Grant: ext.Grant{Decision: sluice.Decision{Allowed: true, Limit: capLimit, Remaining: 6}}},
		{Err: sluice.ErrUnexpectedReply},
	}}
	l, spans, reader := setup(t, next)
	lb, ok := sluice.As[ext.LeaseBatcher](l)
	require.True(t, ok)

	reqs := append([]ext.LeaseRequest{take}, releases...)
	results, err := lb.LeaseBatch(t.Context(), reqs)
	require.NoError(t, err)
	require.Equal(t, next.results, results, "the results come back unchanged")
	require.Equal(t, [][]ext.LeaseRequest{reqs}, next.batches, "one call, the requests unchanged")
	require.Equal(t, map[string]int64{"allowed": 1}, decisionCounts(t, reader), "the take counts; the releases do not")

	next.err = errors.New("connection refused")
	_, err = lb.LeaseBatch(t.Context(), releases)
	require.ErrorContains(t, err, "connection refused")
	require.Equal(t, map[string]int64{"allowed": 1}, decisionCounts(t, reader), "a failed batch of releases alone is no decision")
	got := spans.GetSpans()
	require.Len(t, got, 2)
	require.Equal(t, "sluice.lease_batch", got[1].Name)
	require.Equal(t, codes.Error, got[1].Status.Code, "but its span has the error")

	_, err = lb.LeaseBatch(t.Context(), reqs)
	require.ErrorContains(t, err, "connection refused")
	require.Equal(t, map[string]int64{"allowed": 1, "error": 1}, decisionCounts(t, reader), "a failed batch with a take is one error")
}

// requireNotClaimed requires that l's own type implements exactly what it always
// serves (nothing): every other optional interface it serves only through
// sluice.As, when the limiter it wraps does.
func requireNotClaimed(t *testing.T, l sluice.Limiter) {
	t.Helper()
	require.Equal(t, []string(nil), sluicetest.OwnCapabilities(l), "%T", l)
}

// decisionCounts returns the sluice.decisions counter so far, by outcome.
func decisionCounts(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
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
	return decisions
}

// TestEveryCapabilityThroughTheWholeStack stacks every decorator over the
// token bucket, as docs/http.md suggests (sluiceotel outermost): each
// layer reports every capability, and each call made at the top goes
// through every layer to the bucket and back.
func TestEveryCapabilityThroughTheWholeStack(t *testing.T) {
	tb, err := tokenbucket.New(newMemStore(t))
	require.NoError(t, err)
	co, err := coalesce.New(tb)
	require.NoError(t, err)
	dc, err := denycache.New(co)
	require.NoError(t, err)
	fb, err := fallback.New(dc)
	require.NoError(t, err)
	l, spans, _ := setup(t, fb)
	all := []string{"refund", "reset", "batch", "bound", "lease", "leasebatch"}
	for _, layer := range []sluice.Limiter{tb, co, dc, fb, l} {
		require.Equal(t, all, sluicetest.Capabilities(t, layer), "%T", layer)
	}
	spans.Reset() // Capabilities' own calls through l

	ctx, key := t.Context(), "user:42"
	hourly := sluice.Limit{Rate: 10, Period: time.Hour, Burst: 10} // no refill during the test
	bd, ok := sluice.As[sluice.Bounded](l)
	require.True(t, ok)
	capacity, err := bd.Capacity("k", hourly)
	require.NoError(t, err)
	require.Equal(t, hourly.Burst, capacity)
	d, err := l.AllowN(ctx, key, hourly, 4)
	require.NoError(t, err)
	require.EqualValues(t, 6, d.Remaining)
	r, ok := sluice.As[sluice.Refunder](l)
	require.True(t, ok)
	d, err = r.Refund(ctx, key, hourly, 1)
	require.NoError(t, err)
	require.EqualValues(t, 7, d.Remaining)
	b, ok := sluice.As[sluice.BatchLimiter](l)
	require.True(t, ok)
	results, err := b.AllowBatch(ctx, []sluice.Request{{Key: key, Limit: hourly, N: 1}, {Key: key, Limit: hourly, N: 1}})
	require.NoError(t, err)
	require.EqualValues(t, 5, results[1].Decision.Remaining)
	rs, ok := sluice.As[sluice.Resetter](l)
	require.True(t, ok)
	require.NoError(t, rs.Reset(ctx, key))

	le, ok := sluice.As[ext.Leaser](l)
	require.True(t, ok)
	req := ext.LeaseRequest{Key: key, Limit: hourly, Holder: 7, Cost: 2, Extra: 2, Hold: time.Second}
	g, err := le.Lease(ctx, req)
	require.NoError(t, err)
	require.True(t, g.Allowed)
	require.Equal(t, sluice.SourceStore, g.Source)
	require.EqualValues(t, 2, g.Extra, "a quarter of the 8 left after the cost")
	require.EqualValues(t, 2, g.Reserved)
	require.EqualValues(t, 6, g.Remaining, "10 less the cost and the reservation")
	d, err = le.Release(ctx, key, hourly, 7, 2)
	require.NoError(t, err)
	require.EqualValues(t, 8, d.Remaining, "the unspent tokens are back")

	lb, ok := sluice.As[ext.LeaseBatcher](l)
	require.True(t, ok)
	leased, err := lb.LeaseBatch(ctx, []ext.LeaseRequest{
		{Key: key, Limit: hourly, Holder: 8, Cost: 1, Extra: 1, Hold: time.Second},
		{Key: "user:43", Limit: hourly, Holder: 9, Cost: 1, Extra: 1, Hold: time.Second},
	})
	require.NoError(t, err)
	require.Len(t, leased, 2)
	for i, want := range []int64{6, 8} { // 8 and 10 less the cost and the reservation
		require.NoError(t, leased[i].Err)
		require.True(t, leased[i].Allowed)
		require.Equal(t, sluice.SourceStore, leased[i].Source)
		require.EqualValues(t, 1, leased[i].Extra)
		require.EqualValues(t, 1, leased[i].Reserved)
		require.Equal(t, want, leased[i].Remaining)
	}
	// Holder 8's release and holder 9's take in one batch.
	leased, err = lb.LeaseBatch(ctx, []ext.LeaseRequest{
		{Key: key, Limit: hourly, Holder: 8, Release: true, Unspent: 1},
		{Key: "user:43", Limit: hourly, Holder: 9, Cost: 1, Held: 1, Hold: time.Second},
	})
	require.NoError(t, err)
	require.NoError(t, leased[0].Err)
	require.Equal(t, ext.Grant{Decision: sluice.Decision{Allowed: true, Limit: hourly, Remaining: 7, ResetAfter: leased[0].ResetAfter}},
		leased[0].Grant, "a release: the unspent tokens are back")
	require.NoError(t, leased[1].Err)
	require.True(t, leased[1].Allowed)
	require.EqualValues(t, 7, leased[1].Remaining)

	var names []string
	for _, s := range spans.GetSpans() {
		names = append(names, s.Name)
	}
	require.Equal(t, []string{"sluice.decision", "sluice.batch", "sluice.lease", "sluice.release", "sluice.lease_batch", "sluice.lease_batch"}, names)
}
