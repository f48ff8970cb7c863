// Package fallback decides what a limiter does when its store is slow,
// down or flapping: a decorator with a per-call time budget, a circuit
// breaker, and a policy for the decisions it makes on its own.
//
// [New] wraps any [sluice.Limiter]; its options set the policy
// ([WithPolicy], default [Open]), the budget ([WithTimeout], default
// [DefaultTimeout]), the breaker ([WithBreaker], [WithStateChange]) and
// the calls outstanding beyond which the policy decides
// ([WithMaxInFlight]). Example, ExampleClosed and ExampleLocal show them.
//
// For AllowN, AllowBatch, Lease and LeaseBatch, in order: bad input (the key, then the
// limit and cost by the wrapped algorithm's rules) is an error whatever the
// state of the store; a caller's context already done is its error; with
// the breaker open, or half-open with its probes in flight, the policy
// decides and nothing reaches the store; otherwise the call goes to the
// wrapped limiter within the budget, which the decorator enforces itself.
// A decision is a success; a caller's cancellation is neither success nor
// failure; a configuration error ([IsConfigError]: a key holding another
// type, NOPERM, CROSSSLOT and the like) is returned and never trips the
// breaker.
// Any other error, and the timeout, is a failure: the policy decides, and
// enough consecutive failures open the breaker. A call that timed out may
// still have consumed from the shared limit ([docs/failure.md]).
//
// [Open] allows every request; [Closed] denies, with RetryAfter the
// breaker's cooldown; [Local] decides in process under each replica's share
// of the limit ([LocalShare]). [sluice.Decision.Source] says which decided.
// A policy decides a Lease's Cost and leases nothing. Refund, Reset and
// Release go to the wrapped limiter within the budget only, never through
// the breaker or the policy, and return their errors; a LeaseBatch's
// releases are never the policy's either: they reach the store even with
// the breaker open, and fail with its error.
//
// [docs/failure.md]: https://github.com/sluicehq/sluice/blob/main/docs/failure.md
package fallback
