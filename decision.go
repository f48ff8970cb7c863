package sluice

import (
	"context"
	"fmt"
	"time"
)

// Decision is the outcome of one call to [Limiter.AllowN].
//
// A denial is a Decision with Allowed false, never an error: an error means
// that no decision could be made.
type Decision struct {
	// Allowed reports whether the request may proceed. For a peek (n == 0)
	// it reports whether a request of cost 1 would be allowed now.
	Allowed bool
	// Limit is the limit the decision was made against.
	Limit Limit
	// Remaining is how many more cost units would be allowed right now,
	// after this request: a request of cost Remaining or less made now,
	// with nothing else consumed meanwhile, is allowed. Never negative.
	Remaining int64
	// RetryAfter is zero when Allowed. When denied, it is how long to wait
	// before the same request would be allowed, rounded up, if nothing else
	// consumes meanwhile.
	RetryAfter time.Duration
	// ResetAfter is how long until the limit is back to its full state
	// (Remaining == Burst), rounded up.
	ResetAfter time.Duration
	// Source says how the decision was made: by the store (the zero
	// value), or by a fallback policy while the store was unavailable.
	Source Source
	// Estimated reports that Remaining and ResetAfter are a decorator's
	// estimate of the shared limit rather than the store's reply to this
	// request: a lease decides from tokens taken earlier and adds what the
	// store had left then; a shard scales what one share has left. The
	// figures may then be off by what other processes did meanwhile.
	// Allowed is never an estimate.
	Estimated bool
}

// Source says how a [Decision] was made.
type Source uint8

const (
	// SourceStore: the store decided (Redis, or an in-process store).
	SourceStore Source = iota
	// SourceFallbackOpen: the store was unavailable and the fallback
	// policy allowed the request without counting it.
	SourceFallbackOpen
	// SourceFallbackClosed: the store was unavailable and the fallback
	// policy denied the request.
	SourceFallbackClosed
	// SourceFallbackLocal: the store was unavailable and an in-process
	// limiter, sized to this process's share of the limit, decided.
	SourceFallbackLocal
	// SourceLease: decided in process from tokens this process leased
	// from the shared limit (the lease decorator), which the store keeps
	// reserved for it; not a degraded decision.
	SourceLease
)

// String returns "store", "fallback-open", "fallback-closed",
// "fallback-local" or "lease".
func (s Source) String() string {
	switch s {
	case SourceStore:
		return "store"
	case SourceFallbackOpen:
		return "fallback-open"
	case SourceFallbackClosed:
		return "fallback-closed"
	case SourceFallbackLocal:
		return "fallback-local"
	case SourceLease:
		return "lease"
	}
	return "unknown"
}

// Degraded reports whether a fallback policy made the decision.
func (d Decision) Degraded() bool {
	return d.Source == SourceFallbackOpen || d.Source == SourceFallbackClosed || d.Source == SourceFallbackLocal
}

// Limiter decides whether a request of cost n against key fits limit.
//
// The limit travels with each call, so per-tenant quotas need no new
// limiter and decorators can rescale it. n == 0 peeks: it reports the
// current state without consuming anything. Implementations are safe for
// concurrent use.
//
// AllowN returns an error only when no decision could be made: invalid
// input (errors.Is with [ErrInvalidLimit], [ErrInvalidCost],
// [ErrInvalidKey]) or a store failure.
type Limiter interface {
	AllowN(ctx context.Context, key string, limit Limit, n int64) (Decision, error)
}

// Allow is shorthand for l.AllowN(ctx, key, limit, 1).
func Allow(ctx context.Context, l Limiter, key string, limit Limit) (Decision, error) {
	return l.AllowN(ctx, key, limit, 1)
}

// Peek is shorthand for l.AllowN(ctx, key, limit, 0): the current state of
// key, consuming nothing.
func Peek(ctx context.Context, l Limiter, key string, limit Limit) (Decision, error) {
	return l.AllowN(ctx, key, limit, 0)
}

// Clock tells the time. Limiters take one with a WithClock option to send
// their own time to the script instead of using the Redis server's clock;
// tests inject a fake one.
type Clock interface {
	Now() time.Time
}

// SystemClock is the Clock that reads time.Now.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// MaxBatch is the most requests one AllowBatch call takes.
const MaxBatch = 256

// Request is one decision of a batch: AllowN(Key, Limit, N).
type Request struct {
	Key   string
	Limit Limit
	N     int64
}

// Result is a batch's answer to one [Request]: its Decision, or Err when
// that request could not be decided (nothing was consumed for it).
type Result struct {
	Decision Decision
	Err      error
}

// BatchLimiter decides many independent requests in one round trip: each
// exactly as AllowN would, in order, at one instant of the store's clock.
// A batch is not all or nothing (see multilimit for that). AllowBatch
// validates every request before sending any; an error means no result
// is known (a request may nevertheless have been decided, as when any
// call's reply is lost). Every Sluice algorithm's concrete type is one.
//
// A batch holds 1 to [MaxBatch] requests.
type BatchLimiter interface {
	AllowBatch(ctx context.Context, reqs []Request) ([]Result, error)
}

// RequestError is AllowBatch's error for a request refused before anything
// was sent (an invalid key, limit or cost): nothing of the batch was
// decided, and the batch without request Index may be sent again.
type RequestError struct {
	Index int
	Err   error
}

func (e *RequestError) Error() string { return fmt.Sprintf("request %d: %v", e.Index, e.Err) }

// Unwrap returns the request's own error.
func (e *RequestError) Unwrap() error { return e.Err }
