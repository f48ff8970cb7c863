// Package sluice is a distributed rate limiter on Redis.
//
// Per-pod limiters break when a service scales out: each replica counts on
// its own, so the effective limit grows with the replica count. Sluice keeps
// one shared bucket per key (client, tenant, route) in Redis, checked and
// updated atomically by one Lua script per decision, against the Redis
// server's clock.
//
// The root package holds the vocabulary every other package shares and
// depends on the standard library only:
//
//   - [Limit]: Rate events per Period with bursts up to Burst.
//   - [Decision]: the outcome of one call. A denial is a Decision, not an error.
//   - [Limiter]: the one-method interface every algorithm and decorator implements.
//   - [Store]: the one-method interface every backend implements; it runs a
//     [Script] atomically and returns integer replies.
//   - [Key]: builds Redis Cluster safe keys from user-supplied parts.
//   - Sentinel errors ([ErrInvalidLimit], [ErrInvalidCost],
//     [ErrCostExceedsBurst], [ErrInvalidKey], [ErrKeyConflict],
//     [ErrUnexpectedReply]) checked with errors.Is.
//
// Algorithms live in algorithms/..., backends in store/..., and the shared
// conformance suite and Redis test harness in sluicetest.
//
// # Composing decorators
//
// The decorators (coalesce, lease, shard, denycache, fallback, sluiceotel)
// wrap any Limiter, each other included, in any order but three: a lease
// needs a limiter that leases (the token bucket or GCRA, or a decorator
// over one, but not another lease), coalesce one that takes batches, and
// a shard cannot wrap a shard. Beyond AllowN, a limiter may serve the
// optional capabilities [Refunder], [Resetter], [BatchLimiter], [Bounded]
// and [Leaser]; every decorator serves each one the limiter it wraps
// serves, and says so in [Capabler] (ask with [Supports], which sees
// through decorators, rather than with a type assertion). A stack that
// cannot work fails when it is built, with an error wrapping
// [ErrUnsupported] that names both layers. Through every stack, Limit is
// the caller's, bad input is an error, and only a lease or a shard marks
// a Decision [Decision.Estimated]; the recommended stacks over the token
// bucket and GCRA keep the bucket's Burst + Rate × T bound across
// processes. docs/composition.md
// (https://github.com/sluicehq/sluice/blob/main/docs/composition.md) has the
// table of valid orders and the tests that hold each promise.
package sluice
