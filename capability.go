package sluice

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// The optional capabilities of a [Limiter]. Every Sluice algorithm's
// concrete type has all of them. A decorator serves each one that the
// limiter it wraps serves (forwarding it, or with its own meaning, which
// its documentation states) and reports which in [Capabler]; ask with
// [Supports] rather than a type assertion, which cannot see through a
// decorator.

// Refunder gives back cost units that a request did not use.
type Refunder interface {
	// Refund gives n (>= 1) cost units back to key under limit, as if a
	// request had not used them, and returns the state after the refund
	// with Allowed true. A key never gains more than its capacity.
	Refund(ctx context.Context, key string, limit Limit, n int64) (Decision, error)
}

// Resetter forgets a key's state, so that its next request sees a fresh
// limit.
type Resetter interface {
	Reset(ctx context.Context, key string) error
}

// Bounded reports what a limiter can enforce, without deciding anything.
type Bounded interface {
	// Capacity returns the largest cost a request under limit can ever be
	// allowed (the burst for the bucket algorithms, the rate for the
	// window algorithms, one share's for a sharded key), or the error
	// AllowN would return for limit: an algorithm's own rules included.
	// A request of cost n is valid exactly when limit is and 0 <= n <=
	// Capacity.
	Capacity(limit Limit) (int64, error)
}

// Capability names one optional interface of a [Limiter].
type Capability uint8

// The capabilities, one bit each.
const (
	CanRefund Capability = 1 << iota // [Refunder]
	CanReset                         // [Resetter]
	CanBatch                         // [BatchLimiter]
	CanBound                         // [Bounded]

	// AllCapabilities is every capability: what each Sluice algorithm has.
	AllCapabilities = CanRefund | CanReset | CanBatch | CanBound
)

// String names the capabilities in c, such as "refund|batch".
func (c Capability) String() string {
	var names []string
	for _, n := range []struct {
		c    Capability
		name string
	}{{CanRefund, "refund"}, {CanReset, "reset"}, {CanBatch, "batch"}, {CanBound, "bound"}} {
		if c&n.c != 0 {
			names = append(names, n.name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "|")
}

// Capabler is implemented by decorators, whose methods for the optional
// interfaces exist whatever they wrap but work only when the wrapped
// limiter serves them: Capabilities reports which do. A method called for
// a capability not reported returns an error wrapping [ErrUnsupported].
type Capabler interface {
	Capabilities() Capability
}

// CapabilitiesOf returns the capabilities l serves: those it reports, if it
// is a [Capabler], else those whose interfaces it implements.
func CapabilitiesOf(l Limiter) Capability {
	if c, ok := l.(Capabler); ok {
		return c.Capabilities()
	}
	var c Capability
	if _, ok := l.(Refunder); ok {
		c |= CanRefund
	}
	if _, ok := l.(Resetter); ok {
		c |= CanReset
	}
	if _, ok := l.(BatchLimiter); ok {
		c |= CanBatch
	}
	if _, ok := l.(Bounded); ok {
		c |= CanBound
	}
	return c
}

// Supports reports whether l serves every capability in c.
func Supports(l Limiter, c Capability) bool { return CapabilitiesOf(l)&c == c }

// ErrUnsupported is wrapped when a decorator is asked for a capability
// that the limiter it wraps does not serve.
var ErrUnsupported = errors.New("sluice: the wrapped limiter does not support this")

// Unsupported returns the error of a decorator (named by pkg, such as
// "lease") asked for capability c, which next does not serve.
func Unsupported(pkg string, c Capability, next Limiter) error {
	return fmt.Errorf("%s: %w: %T cannot %s", pkg, ErrUnsupported, next, c)
}

// RequireCapabilities is for decorators' constructors: it returns nil if
// next serves need, and otherwise an error naming both layers (the
// decorator pkg and next's type) and what is missing, so that a stack that
// cannot work fails when it is built, not on its first request.
func RequireCapabilities(pkg string, next Limiter, need Capability) error {
	if next == nil {
		return fmt.Errorf("%s: the wrapped limiter must not be nil", pkg)
	}
	if missing := need &^ CapabilitiesOf(next); missing != 0 {
		return fmt.Errorf("%s: %w: %s cannot wrap %T, which cannot %s", pkg, ErrUnsupported, pkg, next, missing)
	}
	return nil
}

// CheckRequest validates a request for l: key, then limit and cost by l's
// [Bounded] capacity when it has one, else by [Limit.Validate] and
// [Limit.ValidateCost]. Decorators call it before anything that does not
// reach the store, so that bad input is an error whatever they decide.
func CheckRequest(l Limiter, key string, limit Limit, n int64) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if b, ok := l.(Bounded); ok && Supports(l, CanBound) {
		capacity, err := b.Capacity(limit)
		if err != nil {
			return err
		}
		return limit.validateCostUpTo(n, capacity)
	}
	if err := limit.Validate(); err != nil {
		return err
	}
	return limit.ValidateCost(n)
}
