package tokenbucket

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/ext/algorithm"
)

//go:embed tokenbucket.lua
var steps string

// KeySuffix is appended to the caller's key to name the bucket's Redis key,
// so that two algorithms given the same key never read each other's state.
// It keeps the key's hash tag, and so its Redis Cluster slot.
const KeySuffix = ":tb"

var spec = algorithm.Register(&algorithm.Spec{
	Name:          "tokenbucket",
	Steps:         steps,
	Decide:        decide,
	ResetScript:   algorithm.DeleteScript,
	KeySuffix:     KeySuffix,
	ValidateLimit: algorithm.CheckInterval,
	Capacity:      func(l sluice.Limit) int64 { return l.Burst },
	// A deficit after the clock went back from 2100 to 1970, plus a
	// full bucket: anything larger is not a reply of this script.
	MaxReplyMicros: algorithm.MaxNowMicros + 2*algorithm.MaxFillMicros,
	Leases:         true,
})

// Script returns the token bucket's Lua script paired with its Go model,
// for stores that preload scripts (goredisstore.Store.Load) and for tests
// that call it with raw arguments.
func Script() *sluice.Script { return spec.Script }

// Limiter is a token bucket limiter on a [sluice.Store]. It is safe for
// concurrent use.
type Limiter struct{ core *algorithm.LeasingLimiter }

var _ sluice.Limiter = (*Limiter)(nil)

// Option configures a [Limiter].
type Option = algorithm.Option

// WithClock makes the limiter send clock's time with every call instead of
// letting the script read the Redis server clock (client-clock mode). The
// default is the server clock, which is what production callers want; see
// the package documentation before changing it.
func WithClock(clock sluice.Clock) Option { return algorithm.WithClock(clock) }

// New returns a token bucket limiter on store. It does no I/O.
func New(store sluice.Store, opts ...Option) (*Limiter, error) {
	core, err := algorithm.NewLeasing(spec, store, opts...)
	if err != nil {
		return nil, err
	}
	return &Limiter{core: core}, nil
}

// AllowN decides whether n tokens can be taken from the bucket at key under
// limit, and takes them if so. n == 0 peeks. A denial is a Decision with
// Allowed false; an error means no decision was made.
func (l *Limiter) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	return l.core.AllowN(ctx, key, limit, n)
}

// Refund puts back n tokens (1 <= n <= Burst) that a request took but did
// not use, such as the unused part of an estimated cost. The bucket never
// fills past full, so a refund cannot create a burst larger than Burst. It
// returns the bucket's state after the refund, with Allowed true.
func (l *Limiter) Refund(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	return l.core.Refund(ctx, key, limit, n)
}

// Reset deletes the bucket at key: the next request sees a full bucket.
func (l *Limiter) Reset(ctx context.Context, key string) error { return l.core.Reset(ctx, key) }

// ValidateLimit reports whether the token bucket can enforce limit: it must
// pass [sluice.Limit.Validate], and Period / Rate rounded up to whole
// microseconds (the bucket's refill interval) must be within 1% of its
// exact value, so that the enforced rate is never more than 1% below Rate.
// Every limit up to 10,000 per second passes, and any limit whose
// Period / Rate is a whole number of microseconds.
func ValidateLimit(limit sluice.Limit) error {
	if err := limit.Validate(); err != nil {
		return fmt.Errorf("tokenbucket: %w", err)
	}
	if err := algorithm.CheckInterval(limit); err != nil {
		return fmt.Errorf("tokenbucket: %w", err)
	}
	return nil
}

var _ sluice.BatchLimiter = (*Limiter)(nil)

// AllowBatch decides reqs in one round trip, each as AllowN would, in
// order, at one instant (see [sluice.BatchLimiter]). On Redis Cluster all
// the keys must share a slot.
func (l *Limiter) AllowBatch(ctx context.Context, reqs []sluice.Request) ([]sluice.Result, error) {
	return l.core.AllowBatch(ctx, reqs)
}

// Capacity returns the largest cost a request under limit can ever be
// allowed, limit.Burst, or why the algorithm cannot enforce limit
// (see [sluice.Bounded]).
func (l *Limiter) Capacity(key string, limit sluice.Limit) (int64, error) {
	return l.core.Capacity(key, limit)
}

var (
	_ sluice.Refunder = (*Limiter)(nil)
	_ sluice.Resetter = (*Limiter)(nil)
	_ sluice.Bounded  = (*Limiter)(nil)
)

// Lease decides req.Cost and grants up to req.Extra more tokens to hold,
// reserved against the bucket until they are spent, released or expire
// (see [ext.Leaser]; the lease decorator is its user).
func (l *Limiter) Lease(ctx context.Context, req ext.LeaseRequest) (ext.Grant, error) {
	return l.core.Lease(ctx, req)
}

// Release ends holder's reservation on key, giving back unspent tokens
// (see [ext.Leaser]).
func (l *Limiter) Release(ctx context.Context, key string, limit sluice.Limit, holder, unspent int64) (sluice.Decision, error) {
	return l.core.Release(ctx, key, limit, holder, unspent)
}

// LeaseBatch runs many lease requests, takes and releases alike, each on
// a key of its own, in one script call; the lease decorator sends its
// refills and its janitor's releases so.
func (l *Limiter) LeaseBatch(ctx context.Context, reqs []ext.LeaseRequest) ([]ext.LeaseResult, error) {
	return l.core.LeaseBatch(ctx, reqs)
}

var _ ext.Leaser = (*Limiter)(nil)
