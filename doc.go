// Package sluice is a distributed rate limiter on Redis: one shared limit
// per key (client, tenant, route), checked and updated atomically by one
// Lua script per decision against the Redis server's clock, so that the
// limit holds however many replicas share it.
//
// The root package, on the standard library only, holds the user's
// vocabulary: [Limit], [Decision] (a denial is a Decision, not an error),
// [Limiter], [Store] (runs a [Script] atomically), [Key] (Redis Cluster
// safe keys from user input), and sentinel errors for errors.Is
// ([ErrInvalidLimit], [ErrInvalidCost], [ErrCostExceedsBurst],
// [ErrInvalidKey], [ErrKeyConflict], [ErrUnexpectedReply]). Algorithms live
// in algorithms/..., stores in store/..., test helpers in sluicetest. What
// an author of an algorithm, a store or a decorator needs beyond it is the
// extension API, package ext, on which every built-in is built.
//
// The decorators (coalesce, lease, shard, denycache, fallback, sluiceotel)
// wrap any Limiter in any order but three: a lease needs a limiter that
// leases (the token bucket or GCRA, or a decorator other than a lease over
// one), coalesce one that takes batches, and a shard cannot wrap a shard.
// Each serves the optional interfaces ([Refunder], [Resetter],
// [BatchLimiter], [Bounded], and ext's leases) that the limiter it wraps
// serves, and no other: ask with [As], which sees through decorators. A
// stack that cannot work fails when built, with an error wrapping
// [ErrUnsupported] naming both layers.
// Through every stack Limit is the caller's, bad input is an error, only
// a lease or a shard sets [Decision.Estimated], and the recommended stacks
// over the token bucket and GCRA keep the bucket's Burst + Rate × T bound
// across processes. Example_stackBusyAPI and Example_stackHotTenant build
// two; [docs/composition.md] has every valid order and its tests.
//
// [docs/composition.md]: https://github.com/sluicehq/sluice/blob/main/docs/composition.md
package sluice
