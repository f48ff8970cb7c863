// Package sluiceotel records each rate-limit decision in OpenTelemetry: a
// span per decision and three metrics, through a decorator over any
// [sluice.Limiter] that forwards every call unchanged.
//
// [New] uses the global providers unless [WithTracerProvider] or
// [WithMeterProvider] gives others, so an application that configures
// OpenTelemetry once needs no option. [WithAlgorithm] and
// [WithPolicyName] set sluice.algorithm and sluice.policy on spans and
// metrics. Example records into memory; ExampleWithTracerProvider shows
// no-op providers.
//
// Spans: "sluice.decision" per AllowN and "sluice.lease" per Lease carry
// sluice.cost (a lease's Cost), sluice.outcome ("allowed", "denied" or
// "error"), sluice.remaining, sluice.source ("store", "lease" for a
// decision a lease decorator below made from its tokens, or the fallback
// policy that decided) and, a lease's, sluice.lease.extra. A Release has
// "sluice.release" with sluice.lease.unspent, an AllowBatch "sluice.batch"
// and a LeaseBatch "sluice.lease_batch" with sluice.batch.size, and Refund
// and Reset none. A denial is not a span
// error; an error is. The key (sluice.key) is recorded only with
// [WithKeyAttribute]: keys are often personal data.
//
// Metrics: sluice.decisions (counter, by sluice.outcome, sluice.source,
// sluice.algorithm and sluice.policy), sluice.decision.duration (histogram,
// seconds, the same attributes) and sluice.decisions.degraded (counter of
// fallback decisions, by source, algorithm and policy). AllowN, each
// request of a batch, each take of a lease batch, and Lease count as
// decisions; Refund, Reset and Release (alone or in a lease batch) do not.
// Metric attributes never include the key.
//
// Shadow mode: a decision made under a context marked by [ext.WithShadow]
// (an httplimit, grpclimit or sluice serve policy with Shadow set, which
// never denies) carries sluice.shadow=true on its span and on all three
// metrics, beside its real outcome: a would-be denial is outcome "denied"
// with sluice.shadow=true. Other decisions have no sluice.shadow
// attribute, so the series they were recorded in before are unchanged,
// and a count of enforced denials is outcome "denied" without
// sluice.shadow.
package sluiceotel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
)

const instrumentation = "github.com/sluicehq/sluice/sluiceotel"

// Limiter records the decisions of the limiter it wraps: AllowN,
// AllowBatch, Lease and LeaseBatch each in a span and in the metrics. It forwards
// every call unchanged (Refund, Reset, Capacity and Release too, the last
// in a span of its own) and serves every capability the wrapped limiter
// serves. It is safe for concurrent use.
type Limiter struct {
	next      sluice.Limiter
	tracer    trace.Tracer
	decisions metric.Int64Counter
	degraded  metric.Int64Counter
	duration  metric.Float64Histogram
	base      []attribute.KeyValue
	recordKey bool
	// sets[shadow][outcome][source] are the metric attributes, built once
	// so that recording a decision allocates nothing for them.
	sets [2][3][sources]outcomeAttrs
}

// sources is how many values sluice.Source takes: the attribute sets are
// built for each.
const sources = int(sluice.SourceLease) + 1

type outcomeAttrs struct {
	kvs []attribute.KeyValue
	set metric.MeasurementOption
}

var outcomes = [3]string{"allowed", "denied", "error"}

var _ sluice.Limiter = (*Limiter)(nil)

type config struct {
	tp        trace.TracerProvider
	mp        metric.MeterProvider
	algorithm string
	policy    string
	recordKey bool
}

// Option configures a [Limiter]. A nil Option is an error, as is an
// option given a bad value.
type Option func(*config) error

// WithTracerProvider sets the tracer provider (default: the global one).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		if tp == nil {
			return errors.New("sluiceotel: WithTracerProvider(nil): omit the option for the global provider")
		}
		c.tp = tp
		return nil
	}
}

// WithMeterProvider sets the meter provider (default: the global one).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if mp == nil {
			return errors.New("sluiceotel: WithMeterProvider(nil): omit the option for the global provider")
		}
		c.mp = mp
		return nil
	}
}

// WithAlgorithm names the algorithm in spans and metrics (sluice.algorithm).
func WithAlgorithm(name string) Option {
	return func(c *config) error {
		if name == "" {
			return errors.New(`sluiceotel: WithAlgorithm(""): the name must not be empty`)
		}
		c.algorithm = name
		return nil
	}
}

// WithPolicyName names the rate-limit policy (such as an httplimit
// Policy's Name) in spans and metrics (sluice.policy). It is a label only;
// it is unrelated to the fallback package's policies.
func WithPolicyName(name string) Option {
	return func(c *config) error {
		if name == "" {
			return errors.New(`sluiceotel: WithPolicyName(""): the name must not be empty`)
		}
		c.policy = name
		return nil
	}
}

// WithKeyAttribute records the key on spans (sluice.key). It is off by
// default, and never applies to metrics.
func WithKeyAttribute() Option {
	return func(c *config) error {
		c.recordKey = true
		return nil
	}
}

// New returns a Limiter recording the decisions of next.
func New(next sluice.Limiter, opts ...Option) (*Limiter, error) {
	if err := ext.RequireNext("sluiceotel", next); err != nil {
		return nil, err
	}
	c := config{}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("sluiceotel: option %d is nil", i)
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	meter := c.mp.Meter(instrumentation)
	decisions, err := meter.Int64Counter("sluice.decisions", metric.WithDescription("Rate-limit decisions, by outcome."))
	if err != nil {
		return nil, fmt.Errorf("sluiceotel: %w", err)
	}
	degraded, err := meter.Int64Counter("sluice.decisions.degraded", metric.WithDescription("Decisions made by a fallback policy."))
	if err != nil {
		return nil, fmt.Errorf("sluiceotel: %w", err)
	}
	duration, err := meter.Float64Histogram("sluice.decision.duration", metric.WithUnit("s"),
		metric.WithDescription("Time a rate-limit decision took."),
		metric.WithExplicitBucketBoundaries(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1))
	if err != nil {
		return nil, fmt.Errorf("sluiceotel: %w", err)
	}
	var base []attribute.KeyValue
	if c.algorithm != "" {
		base = append(base, attribute.String("sluice.algorithm", c.algorithm))
	}
	if c.policy != "" {
		base = append(base, attribute.String("sluice.policy", c.policy))
	}
	l := &Limiter{
		next: next, tracer: c.tp.Tracer(instrumentation),
		decisions: decisions, degraded: degraded, duration: duration,
		base: base, recordKey: c.recordKey,
	}
	for shadow := range l.sets {
		for o, outcome := range outcomes {
			for src := range l.sets[shadow][o] {
				kvs := append(append([]attribute.KeyValue(nil), base...),
					attribute.String("sluice.outcome", outcome), attribute.String("sluice.source", sluice.Source(src).String()))
				if shadow == 1 {
					kvs = append(kvs, attribute.Bool("sluice.shadow", true))
				}
				l.sets[shadow][o][src] = outcomeAttrs{kvs: kvs, set: metric.WithAttributeSet(attribute.NewSet(kvs...))}
			}
		}
	}
	return l, nil
}

// AllowN decides through the wrapped limiter and records the decision.
func (l *Limiter) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	if ctx == nil {
		return sluice.Decision{}, sluice.ErrNilContext
	}
	ctx, span := l.tracer.Start(ctx, "sluice.decision", trace.WithSpanKind(trace.SpanKindInternal))
	defer span.End()
	start := time.Now()
	d, err := l.next.AllowN(ctx, key, limit, n)
	elapsed := time.Since(start).Seconds()

	a := l.record(ctx, elapsed, d, err)
	l.annotate(span, a, key, n, d, err)
	return d, err
}

// annotate sets the attributes of a decision's span, and its error.
func (l *Limiter) annotate(span trace.Span, a outcomeAttrs, key string, n int64, d sluice.Decision, err error) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(a.kvs...)
	span.SetAttributes(attribute.Int64("sluice.cost", n), attribute.Int64("sluice.remaining", d.Remaining))
	if l.recordKey {
		span.SetAttributes(attribute.String("sluice.key", key))
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "no rate-limit decision")
	}
}

// record counts one decision (or error) in the metrics and returns its
// attributes (sluice.shadow=true among them when ctx is a shadow one).
func (l *Limiter) record(ctx context.Context, elapsed float64, d sluice.Decision, err error) outcomeAttrs {
	outcome := 0 // allowed
	switch {
	case err != nil:
		outcome = 2
	case !d.Allowed:
		outcome = 1
	}
	shadow := 0
	if ext.IsShadow(ctx) {
		shadow = 1
	}
	sets := &l.sets[shadow][outcome]
	a := sets[min(int(d.Source), len(sets)-1)]
	l.decisions.Add(ctx, 1, a.set)
	l.duration.Record(ctx, elapsed, a.set)
	if err == nil && d.Degraded() {
		l.degraded.Add(ctx, 1, a.set)
	}
	return a
}

// AllowBatch decides a batch through the wrapped limiter, in one span
// ("sluice.batch", with the batch's size as sluice.batch.size), and counts
// each request's decision in the metrics, with the batch's duration.
func (l forwarded) AllowBatch(ctx context.Context, reqs []sluice.Request) ([]sluice.Result, error) {
	if ctx == nil {
		return nil, sluice.ErrNilContext
	}
	ctx, span := l.tracer.Start(ctx, "sluice.batch", trace.WithSpanKind(trace.SpanKindInternal))
	defer span.End()
	start := time.Now()
	inner, err := ext.Require[sluice.BatchLimiter]("sluiceotel", l.next)
	if err != nil {
		return nil, err
	}
	results, err := inner.AllowBatch(ctx, reqs)
	elapsed := time.Since(start).Seconds()
	if err != nil {
		l.record(ctx, elapsed, sluice.Decision{}, err)
		span.RecordError(err)
		span.SetStatus(codes.Error, "no rate-limit decision")
		return nil, err
	}
	for _, r := range results {
		l.record(ctx, elapsed, r.Decision, r.Err)
	}
	if span.IsRecording() {
		span.SetAttributes(l.base...)
		span.SetAttributes(attribute.Int("sluice.batch.size", len(reqs)))
	}
	return results, nil
}

// As finds the optional interfaces the wrapped limiter serves (see
// [sluice.As]): the Limiter serves them too, through itself.
func (l *Limiter) As(target any) bool { return ext.Forward(target, l.next, forwarded{l}) }

// forwarded holds the methods of the optional interfaces, served only
// when the wrapped limiter serves them.
type forwarded struct{ *Limiter }

// Refund passes a refund to the wrapped limiter; it is not recorded.
func (l forwarded) Refund(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	if ctx == nil {
		return sluice.Decision{}, sluice.ErrNilContext
	}
	inner, err := ext.Require[sluice.Refunder]("sluiceotel", l.next)
	if err != nil {
		return sluice.Decision{}, err
	}
	return inner.Refund(ctx, key, limit, n)
}

// Reset passes a reset to the wrapped limiter; it is not recorded.
func (l forwarded) Reset(ctx context.Context, key string) error {
	if ctx == nil {
		return sluice.ErrNilContext
	}
	inner, err := ext.Require[sluice.Resetter]("sluiceotel", l.next)
	if err != nil {
		return err
	}
	return inner.Reset(ctx, key)
}

// Capacity returns the wrapped limiter's capacity.
func (l forwarded) Capacity(key string, limit sluice.Limit) (int64, error) {
	return ext.Capacity(l.next, key, limit)
}

// Lease passes a lease request to the wrapped limiter in a span
// ("sluice.lease", with the decision's attributes and the tokens granted
// beyond the cost as sluice.lease.extra), and counts the decision of
// req.Cost in the metrics as AllowN does.
func (l forwarded) Lease(ctx context.Context, req ext.LeaseRequest) (ext.Grant, error) {
	if ctx == nil {
		return ext.Grant{}, sluice.ErrNilContext
	}
	ctx, span := l.tracer.Start(ctx, "sluice.lease", trace.WithSpanKind(trace.SpanKindInternal))
	defer span.End()
	start := time.Now()
	inner, err := ext.Require[ext.Leaser]("sluiceotel", l.next)
	if err != nil {
		return ext.Grant{}, err
	}
	g, err := inner.Lease(ctx, req)
	elapsed := time.Since(start).Seconds()

	a := l.record(ctx, elapsed, g.Decision, err)
	l.annotate(span, a, req.Key, req.Cost, g.Decision, err)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int64("sluice.lease.extra", g.Extra))
	}
	return g, err
}

// LeaseBatch passes many lease requests to the wrapped limiter in one
// call, in one span ("sluice.lease_batch", with the batch's size as
// sluice.batch.size), and counts each take's decision of its Cost in the
// metrics as Lease does; a release ([ext.LeaseRequest.Release]) is not
// counted, as Release is not, nor is the failure of a batch of releases
// alone.
func (l forwarded) LeaseBatch(ctx context.Context, reqs []ext.LeaseRequest) ([]ext.LeaseResult, error) {
	if ctx == nil {
		return nil, sluice.ErrNilContext
	}
	inner, err := ext.Require[ext.LeaseBatcher]("sluiceotel", l.next)
	if err != nil {
		return nil, err
	}
	ctx, span := l.tracer.Start(ctx, "sluice.lease_batch", trace.WithSpanKind(trace.SpanKindInternal))
	defer span.End()
	start := time.Now()
	results, err := inner.LeaseBatch(ctx, reqs)
	elapsed := time.Since(start).Seconds()
	takes := false
	for _, r := range reqs {
		takes = takes || !r.Release
	}
	if err != nil {
		if takes {
			l.record(ctx, elapsed, sluice.Decision{}, err)
		}
		span.RecordError(err)
		span.SetStatus(codes.Error, "no rate-limit decision")
		return nil, err
	}
	for i, r := range results {
		if i < len(reqs) && !reqs[i].Release {
			l.record(ctx, elapsed, r.Decision, r.Err)
		}
	}
	if span.IsRecording() {
		span.SetAttributes(l.base...)
		span.SetAttributes(attribute.Int("sluice.batch.size", len(reqs)))
	}
	return results, nil
}

// Release passes a release to the wrapped limiter in a span
// ("sluice.release", with sluice.lease.unspent); like a refund, it is not
// counted in the metrics.
func (l forwarded) Release(ctx context.Context, key string, limit sluice.Limit, holder, unspent int64) (sluice.Decision, error) {
	if ctx == nil {
		return sluice.Decision{}, sluice.ErrNilContext
	}
	ctx, span := l.tracer.Start(ctx, "sluice.release", trace.WithSpanKind(trace.SpanKindInternal))
	defer span.End()
	inner, err := ext.Require[ext.Leaser]("sluiceotel", l.next)
	if err != nil {
		return sluice.Decision{}, err
	}
	d, err := inner.Release(ctx, key, limit, holder, unspent)
	if span.IsRecording() {
		span.SetAttributes(l.base...)
		span.SetAttributes(attribute.Int64("sluice.lease.unspent", unspent))
		if l.recordKey {
			span.SetAttributes(attribute.String("sluice.key", key))
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "release failed")
		}
	}
	return d, err
}

var (
	_ sluice.BatchLimiter = forwarded{}
	_ sluice.Refunder     = forwarded{}
	_ sluice.Resetter     = forwarded{}
	_ sluice.Bounded      = forwarded{}
	_ ext.Leaser          = forwarded{}
	_ ext.LeaseBatcher    = forwarded{}
)
