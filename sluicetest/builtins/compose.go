package builtins

import (
	"errors"
	"fmt"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/coalesce"
	"github.com/sluicehq/sluice/denycache"
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/shard"
	"github.com/sluicehq/sluice/sluiceotel"
)

// Decorator is one of Sluice's decorators, for composition tests: Wrap
// builds a new one over next with the test settings below.
type Decorator struct {
	Name string
	Wrap func(next sluice.Limiter) (sluice.Limiter, error)
}

// The test settings of [Decorators].
const (
	// ComposeLeaseBatch is the lease decorator's B (lease.WithSize).
	ComposeLeaseBatch = 10
	// ComposeShards is the shard decorator's S (shard.WithShards).
	ComposeShards = 3
	// ComposeFallbackTimeout is the fallback decorator's time budget: long
	// enough that a healthy store never trips it, even under -race.
	ComposeFallbackTimeout = 10 * time.Second
)

// Decorators lists every decorator Sluice ships, each with test settings:
// coalesce (defaults), lease (B = [ComposeLeaseBatch]), shard (S =
// [ComposeShards], every key), denycache (defaults), fallback (the default
// Open policy, a [ComposeFallbackTimeout] budget) and sluiceotel (no-op
// tracer and meter providers).
var Decorators = []Decorator{
	{Name: "coalesce", Wrap: func(next sluice.Limiter) (sluice.Limiter, error) { return nilIfErr(coalesce.New(next)) }},
	{Name: "lease", Wrap: func(next sluice.Limiter) (sluice.Limiter, error) {
		return nilIfErr(lease.New(next, lease.WithSize(ComposeLeaseBatch)))
	}},
	{Name: "shard", Wrap: func(next sluice.Limiter) (sluice.Limiter, error) {
		return nilIfErr(shard.New(next, shard.WithShards(ComposeShards)))
	}},
	{Name: "denycache", Wrap: func(next sluice.Limiter) (sluice.Limiter, error) { return nilIfErr(denycache.New(next)) }},
	{Name: "fallback", Wrap: func(next sluice.Limiter) (sluice.Limiter, error) {
		return nilIfErr(fallback.New(next, fallback.WithTimeout(ComposeFallbackTimeout)))
	}},
	{Name: "sluiceotel", Wrap: func(next sluice.Limiter) (sluice.Limiter, error) {
		return nilIfErr(sluiceotel.New(next,
			sluiceotel.WithTracerProvider(tracenoop.NewTracerProvider()),
			sluiceotel.WithMeterProvider(metricnoop.NewMeterProvider())))
	}},
}

// nilIfErr turns a constructor's (*T, error) into (sluice.Limiter, error)
// without a non-nil interface holding a nil pointer.
func nilIfErr[L sluice.Limiter](l L, err error) (sluice.Limiter, error) {
	if err != nil {
		return nil, err
	}
	return l, nil
}

// DecoratorByName returns the decorator of [Decorators] named name.
func DecoratorByName(name string) (Decorator, bool) {
	for _, d := range Decorators {
		if d.Name == name {
			return d, true
		}
	}
	return Decorator{}, false
}

// Stack wraps base in the decorators of [Decorators] named by names,
// outermost first: Stack(tb, "sluiceotel", "fallback", "lease") is
// sluiceotel(fallback(lease(tb))). It returns the stack and a function
// that closes every layer with a Close method (a lease gives back what it
// holds), outermost first, and returns the first error. When a layer
// cannot be built, Stack closes the layers built so far and returns that
// layer's error (for a layer that cannot wrap the one below, an error
// wrapping [sluice.ErrUnsupported] that names both).
func Stack(base sluice.Limiter, names ...string) (sluice.Limiter, func() error, error) {
	l := base
	var closers []func() error // innermost first
	closeAll := func() error {
		var errs []error
		for i := len(closers) - 1; i >= 0; i-- {
			errs = append(errs, closers[i]())
		}
		return errors.Join(errs...)
	}
	for i := len(names) - 1; i >= 0; i-- {
		d, ok := DecoratorByName(names[i])
		if !ok {
			_ = closeAll()
			return nil, nil, fmt.Errorf("sluicetest: no decorator %q", names[i])
		}
		next, err := d.Wrap(l)
		if err != nil {
			_ = closeAll()
			return nil, nil, err
		}
		if c, ok := next.(interface{ Close() error }); ok {
			closers = append(closers, c.Close)
		}
		l = next
	}
	return l, closeAll, nil
}
