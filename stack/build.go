package stack

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms"
	"github.com/sluicehq/sluice/coalesce"
	"github.com/sluicehq/sluice/denycache"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/shard"
	"github.com/sluicehq/sluice/sluiceotel"
	"github.com/sluicehq/sluice/store/memstore"
)

// Option configures [Build].
type Option func(*config) error

type config struct {
	name string
	mp   metric.MeterProvider
	tp   trace.TracerProvider
}

// WithName names the policy the stack serves, for sluiceotel's policy
// attribute (Spec.Tracing).
func WithName(name string) Option {
	return func(c *config) error {
		if name == "" {
			return errors.New("stack: WithName(\"\"): omit the option for no name")
		}
		c.name = name
		return nil
	}
}

// WithMeterProvider sets the meter provider of Spec.Tracing (default: the
// global one).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if mp == nil {
			return errors.New("stack: WithMeterProvider(nil): omit the option for the global provider")
		}
		c.mp = mp
		return nil
	}
}

// WithTracerProvider sets the tracer provider of Spec.Tracing (default:
// the global one).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		if tp == nil {
			return errors.New("stack: WithTracerProvider(nil): omit the option for the global provider")
		}
		c.tp = tp
		return nil
	}
}

// Stack is a built [Spec]: a [sluice.Limiter] that serves what its
// outermost layer serves (see [sluice.As]), with the limit and cost it
// was declared with. Close it when done: it gives a lease's unspent tokens
// back.
type Stack struct {
	outer     sluice.Limiter
	algorithm sluice.Limiter
	limit     sluice.Limit
	cost      int64
	refills   bool
	layers    []string // outermost first
	closers   []func() error
}

var _ sluice.Limiter = (*Stack)(nil)

// AllowN decides as the stack's outermost layer does.
func (s *Stack) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	return s.outer.AllowN(ctx, key, limit, n)
}

// Allow decides one request of the declared cost under the declared limit.
func (s *Stack) Allow(ctx context.Context, key string) (sluice.Decision, error) {
	return s.outer.AllowN(ctx, key, s.limit, s.cost)
}

// As finds T in the outermost layer (see [sluice.As]).
func (s *Stack) As(target any) bool { return ext.Delegate(target, s.outer) }

// Limit is the declared limit, its defaults filled in.
func (s *Stack) Limit() sluice.Limit { return s.limit }

// Cost is the declared cost of a request, at least 1.
func (s *Stack) Cost() int64 { return s.cost }

// Algorithm is the bare algorithm under every decorator.
func (s *Stack) Algorithm() sluice.Limiter { return s.algorithm }

// Layers names the stack's layers, outermost first, the algorithm last:
// ["sluiceotel", "fallback", "denycache", "shard", "lease", "coalesce",
// "tokenbucket"] for a Spec with everything.
func (s *Stack) Layers() []string { return append([]string(nil), s.layers...) }

// AlgorithmName names the algorithm, the last of [Stack.Layers], with no
// copy: "tokenbucket", "gcra", "fixedwindow", "slidingcounter" or
// "slidinglog".
func (s *Stack) AlgorithmName() string { return s.layers[len(s.layers)-1] }

// Refills reports whether the algorithm's quota comes back continuously
// (the token bucket and GCRA) rather than by windows.
func (s *Stack) Refills() bool { return s.refills }

// Close closes the layers that hold anything (a lease's tokens go back to
// the store). It is safe to call twice.
func (s *Stack) Close() error {
	closers := s.closers
	s.closers = nil
	return closeAll(closers)
}

func closeAll(closers []func() error) error {
	var errs []error
	for _, c := range closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// Build builds spec's stack on store. Every error names the field of the
// Spec it is about, and nothing is left open after one. Besides what each
// layer's New refuses, Build refuses:
//   - a Burst other than Rate for a window algorithm (they have no burst);
//   - a Cost that the whole stack can never allow: above the burst, above
//     the smallest share of a sharded key, or above what Fallback "local"
//     allows each of Replicas processes;
//   - HotKeys without Lease or Shards, Shards of 1, and Replicas or
//     FallbackTimeout without the Fallback they configure.
func Build(spec Spec, store sluice.Store, opts ...Option) (*Stack, error) {
	var cfg config
	for i, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("stack: option %d is nil", i)
		}
		if err := opt(&cfg); err != nil {
			return nil, err
		}
	}
	if ext.IsNil(store) {
		return nil, errors.New("stack: the store must not be nil")
	}
	limit, cost, err := spec.limitAndCost()
	if err != nil {
		return nil, err
	}
	if err := spec.checkFields(); err != nil {
		return nil, err
	}
	alg, err := algorithms.New(spec.Algorithm, store)
	if err != nil {
		return nil, err
	}
	s := &Stack{algorithm: alg, limit: limit, cost: cost}
	capacity, err := ext.Capacity(alg, "stack", limit)
	if err != nil {
		return nil, fmt.Errorf("rate, period or burst: %w", err)
	}
	s.refills = refills(alg)
	if !s.refills && spec.Burst != 0 && limit.Burst != limit.Rate {
		return nil, fmt.Errorf("burst: %d, but %s has no burst (it allows Rate per Period): set it to the rate, %d, or leave it out",
			limit.Burst, algorithmName(spec.Algorithm), limit.Rate)
	}
	if cost > capacity {
		return nil, fmt.Errorf("cost: %d can never be allowed: the limit's capacity is %d", cost, capacity)
	}
	if s.outer, err = s.wrap(spec, alg, cfg); err != nil {
		_ = s.Close()
		return nil, err
	}
	if err := s.checkCost(spec); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// limitAndCost reads the limit and the cost, their defaults filled in.
func (spec Spec) limitAndCost() (sluice.Limit, int64, error) {
	limit := sluice.Limit{Rate: int64(spec.Rate), Period: time.Duration(spec.Period), Burst: int64(spec.Burst)}
	if limit.Burst == 0 {
		limit.Burst = limit.Rate
	}
	if err := limit.Validate(); err != nil {
		return limit, 0, fmt.Errorf("rate, period or burst: %w", err)
	}
	cost := int64(spec.Cost)
	switch {
	case cost < 0:
		return limit, 0, fmt.Errorf("cost: %d is negative", cost)
	case cost == 0:
		cost = 1
	}
	return limit, cost, nil
}

// checkFields refuses what configures nothing, or nothing sensible.
func (spec Spec) checkFields() error {
	switch {
	case spec.Lease < 0:
		return fmt.Errorf("lease: %d is negative (0 for none)", spec.Lease)
	case spec.Shards < 0 || spec.Shards == 1 || spec.Shards > shard.MaxShards:
		return fmt.Errorf("shards: %d (0 for none, or 2 to %d)", spec.Shards, shard.MaxShards)
	case len(spec.HotKeys) > 0 && spec.Lease == 0 && spec.Shards == 0:
		return errors.New("hot_keys: they choose the keys to lease or shard: give lease or shards too")
	case spec.Replicas < 0 || spec.Replicas > math.MaxInt32:
		return fmt.Errorf("replicas: %d is out of range", spec.Replicas)
	case spec.FallbackTimeout < 0:
		return fmt.Errorf("fallback_timeout: %s is negative", spec.FallbackTimeout)
	}
	if spec.Fallback == "" && (spec.FallbackTimeout != 0 || spec.Replicas != 0) {
		return errors.New("fallback_timeout and replicas configure a fallback: give fallback too")
	}
	if spec.Fallback != "local" && spec.Replicas != 0 {
		return fmt.Errorf("replicas: only fallback: local uses them, not %q", spec.Fallback)
	}
	return nil
}

// wrap wraps alg in spec's decorators, innermost first, recording what
// must be closed.
func (s *Stack) wrap(spec Spec, alg sluice.Limiter, cfg config) (sluice.Limiter, error) {
	l := alg
	s.layers = []string{algorithmName(spec.Algorithm)}
	var err error
	defer func() { slices.Reverse(s.layers) }()
	if spec.Coalesce {
		s.layers = append(s.layers, "coalesce")
		if l, err = coalesce.New(l); err != nil {
			return nil, fmt.Errorf("coalesce: %w", err)
		}
	}
	if spec.Lease > 0 {
		s.layers = append(s.layers, "lease")
		opts := []lease.Option{lease.WithSize(int64(spec.Lease))}
		if len(spec.HotKeys) > 0 {
			opts = append(opts, lease.WithHotKeys(spec.HotKeys...))
		}
		leased, err := lease.New(l, opts...)
		if err != nil {
			return nil, fmt.Errorf("lease: %w", err)
		}
		s.closers = append(s.closers, leased.Close)
		l = leased
	}
	if spec.Shards > 0 {
		s.layers = append(s.layers, "shard")
		opts := []shard.Option{shard.WithShards(int(spec.Shards))}
		if len(spec.HotKeys) > 0 {
			opts = append(opts, shard.WithHotKeys(spec.HotKeys...))
		}
		if l, err = shard.New(l, opts...); err != nil {
			return nil, fmt.Errorf("shards: %w", err)
		}
	}
	if spec.DenyCache {
		s.layers = append(s.layers, "denycache")
		if l, err = denycache.New(l); err != nil {
			return nil, fmt.Errorf("deny_cache: %w", err)
		}
	}
	if spec.Fallback != "" {
		s.layers = append(s.layers, "fallback")
		if l, err = withFallback(l, spec); err != nil {
			return nil, err
		}
	}
	if spec.Tracing {
		s.layers = append(s.layers, "sluiceotel")
		opts := []sluiceotel.Option{sluiceotel.WithAlgorithm(algorithmName(spec.Algorithm))}
		if cfg.name != "" {
			opts = append(opts, sluiceotel.WithPolicyName(cfg.name))
		}
		if cfg.mp != nil {
			opts = append(opts, sluiceotel.WithMeterProvider(cfg.mp))
		}
		if cfg.tp != nil {
			opts = append(opts, sluiceotel.WithTracerProvider(cfg.tp))
		}
		if l, err = sluiceotel.New(l, opts...); err != nil {
			return nil, fmt.Errorf("tracing: %w", err)
		}
	}
	return l, nil
}

func withFallback(l sluice.Limiter, spec Spec) (sluice.Limiter, error) {
	var policy fallback.Policy
	switch spec.Fallback {
	case "open":
		policy = fallback.Open()
	case "closed":
		policy = fallback.Closed()
	case "local":
		if spec.Replicas < 1 {
			return nil, errors.New("replicas: fallback: local needs the number of processes sharing the limit")
		}
		local, err := localLimiter(spec)
		if err != nil {
			return nil, err
		}
		if policy, err = fallback.Local(local, fallback.Replicas(int(spec.Replicas))); err != nil {
			return nil, fmt.Errorf("fallback: %w", err)
		}
	default:
		return nil, fmt.Errorf("fallback: unknown %q (open, closed or local)", spec.Fallback)
	}
	opts := []fallback.Option{fallback.WithPolicy(policy)}
	if spec.FallbackTimeout > 0 {
		opts = append(opts, fallback.WithTimeout(time.Duration(spec.FallbackTimeout)))
	}
	f, err := fallback.New(l, opts...)
	if err != nil {
		return nil, fmt.Errorf("fallback: %w", err)
	}
	return f, nil
}

// localLimiter is the algorithm of Fallback "local", in process.
func localLimiter(spec Spec) (sluice.Limiter, error) {
	mem, err := memstore.New()
	if err != nil {
		return nil, err
	}
	return algorithms.New(spec.Algorithm, mem)
}

// checkCost refuses a cost that the built stack can never allow, on a key
// it leases or shards: above the smallest share, or above a local
// fallback's share.
func (s *Stack) checkCost(spec Spec) error {
	key := sluice.Key("stack")
	if len(spec.HotKeys) > 0 {
		key = sluice.Key(spec.HotKeys[0])
	}
	if err := ext.CheckRequest(s.outer, key, s.limit, s.cost); err != nil {
		if spec.Shards > 0 {
			return fmt.Errorf("cost: %d can never be allowed on a sharded key, whose smallest share of %d admits less: %w",
				s.cost, spec.Shards, err)
		}
		return fmt.Errorf("cost: %w", err)
	}
	if spec.Fallback == "local" {
		local, err := localLimiter(spec)
		if err != nil {
			return err
		}
		share := fallback.LocalShare(s.limit, int(spec.Replicas))
		capacity, err := ext.Capacity(local, key, share)
		if err == nil && s.cost > capacity {
			return fmt.Errorf("cost: %d can never be allowed while the store fails: fallback: local gives each of %d replicas %d at most",
				s.cost, spec.Replicas, capacity)
		}
	}
	return nil
}

// refills reports whether alg's quota comes back continuously: a bucket's
// capacity is its Burst, a window algorithm's its Rate, so a limit whose
// two differ tells them apart.
func refills(alg sluice.Limiter) bool {
	probe := sluice.Limit{Rate: 1, Period: time.Second, Burst: 2}
	c, err := ext.Capacity(alg, "stack", probe)
	return err == nil && c == probe.Burst
}

func algorithmName(s string) string {
	if s == "" {
		return "tokenbucket"
	}
	return s
}
