package sluice

import (
	"context"
	"errors"
)

// The optional capabilities of a [Limiter]: [Refunder], [Resetter],
// [BatchLimiter] and [Bounded] (and, for plugin authors, the lease
// interfaces of package ext). Every Sluice algorithm's concrete type has
// the four. A decorator serves each one that the limiter it wraps serves,
// and no other: ask with [As], which sees through decorators.

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
	// Capacity returns the largest cost a request on key under limit can
	// ever be allowed (the burst for the bucket algorithms, the rate for
	// the window algorithms, one share's for a sharded key), or the error
	// AllowN would return for limit: an algorithm's own rules included.
	// A request of cost n is valid exactly when limit is and 0 <= n <=
	// Capacity.
	Capacity(key string, limit Limit) (int64, error)
}

// As returns l's implementation of the optional interface T (such as
// [Refunder]) and true, or false when l cannot serve it: l itself when
// its type implements T, else what l's As method finds. A decorator has
// an As method (errors.As's shape, As(target any) bool, with target a
// non-nil pointer to an interface type) that sets *target and reports
// true exactly when the limiter it wraps serves T; its own type
// implements an optional interface only when it always serves it. So
// neither a type assertion nor As says yes to a call that can only fail.
func As[T any](l Limiter) (T, bool) {
	var t T
	if l == nil {
		return t, false
	}
	if t, ok := l.(T); ok {
		return t, true
	}
	if a, ok := l.(interface{ As(target any) bool }); ok && a.As(&t) {
		return t, true
	}
	return t, false
}

// ErrUnsupported is wrapped when a stack cannot be built because a
// decorator needs a capability that the limiter it wraps does not serve.
var ErrUnsupported = errors.New("sluice: the wrapped limiter does not support this")
