// Package ext is Sluice's extension API: what an algorithm, a store or a
// decorator written outside this repository needs to be as capable as a
// built-in, kept apart from the user's vocabulary in package sluice as
// database/sql/driver stands beside database/sql. Every built-in is built
// on it and on nothing private.
//
//   - A store returns a Redis error reply as a [ServerError], whose Code
//     classifies it (errors.As, never the text) and which wraps the
//     sentinel error its code stands for.
//   - A decorator forwards the optional interfaces of the limiter it wraps
//     with [Forward] (its As method in one line), requires what it cannot
//     do without with [Require], and validates input with [CheckRequest].
//   - A limiter that serves leases implements [Leaser] (and [LeaseBatcher]
//     for many keys in one call); the lease decorator is their user.
//   - An algorithm is declared in package ext/algorithm as its Lua body
//     and its Go twin; the framework supplies validation, the batch
//     script, leasing where the state allows it, and the limiter.
//   - Package ext/batching sends decisions and leases in as few batches as
//     the store takes, for decorators that batch.
package ext
