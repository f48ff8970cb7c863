// Package forward passes the optional capabilities of a [sluice.Limiter]
// (refund, reset, batch, capacity, lease) through a decorator to the limiter it
// wraps, or returns the error that says the wrapped limiter cannot: the
// one way every decorator forwards what it does not change.
package forward

import (
	"context"

	"github.com/sluicehq/sluice"
)

// Refund passes a refund to next, or fails naming pkg and next.
func Refund(ctx context.Context, pkg string, next sluice.Limiter, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	r, ok := next.(sluice.Refunder)
	if !ok || !sluice.Supports(next, sluice.CanRefund) {
		return sluice.Decision{}, sluice.Unsupported(pkg, sluice.CanRefund, next)
	}
	return r.Refund(ctx, key, limit, n)
}

// Reset passes a reset to next, or fails naming pkg and next.
func Reset(ctx context.Context, pkg string, next sluice.Limiter, key string) error {
	r, ok := next.(sluice.Resetter)
	if !ok || !sluice.Supports(next, sluice.CanReset) {
		return sluice.Unsupported(pkg, sluice.CanReset, next)
	}
	return r.Reset(ctx, key)
}

// AllowBatch passes a batch to next, or fails naming pkg and next.
func AllowBatch(ctx context.Context, pkg string, next sluice.Limiter, reqs []sluice.Request) ([]sluice.Result, error) {
	b, ok := next.(sluice.BatchLimiter)
	if !ok || !sluice.Supports(next, sluice.CanBatch) {
		return nil, sluice.Unsupported(pkg, sluice.CanBatch, next)
	}
	return b.AllowBatch(ctx, reqs)
}

// Capacity asks next for the capacity of key under limit, or fails naming pkg and next.
func Capacity(pkg string, next sluice.Limiter, key string, limit sluice.Limit) (int64, error) {
	b, ok := next.(sluice.Bounded)
	if !ok || !sluice.Supports(next, sluice.CanBound) {
		return 0, sluice.Unsupported(pkg, sluice.CanBound, next)
	}
	return b.Capacity(key, limit)
}

// CapacityOr returns next's capacity for key under limit when next is bounded, and
// otherwise what [sluice.Limit.Validate] allows: limit's Burst, or the
// limit's error.
func CapacityOr(next sluice.Limiter, key string, limit sluice.Limit) (int64, error) {
	if b, ok := next.(sluice.Bounded); ok && sluice.Supports(next, sluice.CanBound) {
		return b.Capacity(key, limit)
	}
	if err := limit.Validate(); err != nil {
		return 0, err
	}
	return limit.Burst, nil
}

// Lease passes a lease request to next, or fails naming pkg and next.
func Lease(ctx context.Context, pkg string, next sluice.Limiter, req sluice.LeaseRequest) (sluice.Grant, error) {
	l, ok := next.(sluice.Leaser)
	if !ok || !sluice.Supports(next, sluice.CanLease) {
		return sluice.Grant{}, sluice.Unsupported(pkg, sluice.CanLease, next)
	}
	return l.Lease(ctx, req)
}

// Release passes a release to next, or fails naming pkg and next.
func Release(ctx context.Context, pkg string, next sluice.Limiter, key string, limit sluice.Limit, holder int64, unspent int64) (sluice.Decision, error) {
	l, ok := next.(sluice.Leaser)
	if !ok || !sluice.Supports(next, sluice.CanLease) {
		return sluice.Decision{}, sluice.Unsupported(pkg, sluice.CanLease, next)
	}
	return l.Release(ctx, key, limit, holder, unspent)
}
