// Package fallback decides what a limiter does when its store is slow,
// down or flapping: a decorator with a per-call timeout budget, a circuit
// breaker, and a policy for the decisions it makes on its own.
//
// # Order of operations
//
// For each call of AllowN, AllowBatch and Lease, in order:
//
//  1. Bad input is an error, whatever the state of the store
//     (TestBadInputIsAnErrorWhateverTheBreaker): the key is checked
//     first, and the limit and the cost by the wrapped algorithm's own
//     rules, by the store's call or, when the policy is to decide, before
//     it does (a lease request's every field, first).
//  2. A caller's context that is already done is returned as its error.
//  3. If the breaker is open (or half-open with its probes in flight), the
//     policy decides at once: no command reaches the store.
//  4. Otherwise the call goes to the wrapped limiter with the timeout
//     budget (default [DefaultTimeout]), enforced by the decorator itself,
//     so a client that ignores context deadlines cannot hold the caller
//     longer. At most [DefaultMaxInFlight] calls may be outstanding; beyond
//     that the policy decides, so a stalled server cannot pile up
//     goroutines.
//  5. The outcome is classified. A decision (allowed or denied) is a
//     success. A caller's cancellation is neither success nor failure. A
//     configuration error (invalid input, a key holding another type,
//     NOPERM, NOAUTH, CROSSSLOT, an unknown command) is returned as an
//     error and does not trip the breaker: falling back would hide it. Any
//     other error, and the timeout, is a failure: the policy decides, and
//     enough consecutive failures open the breaker.
//
// When the policy decides a Lease, it decides the request's Cost as it
// would an AllowN of that cost, and leases nothing: the Grant carries no
// Extra, no reservation and Expires 0. Refund, Reset and Release go to the wrapped limiter
// within the time budget only, never through the breaker or the policy:
// when they fail, they return the error.
//
// # Policies
//
//   - [Open] allows every request (fail open): availability first.
//   - [Closed] denies every request (fail closed), with RetryAfter set to
//     the breaker's cooldown: protection first.
//   - [Local] decides with an in-process limiter of the same algorithm,
//     sized to limit / N, N being the number of replicas sharing the
//     limit: with N correct, N processes admit at most the limit together.
//
// Every decision says how it was made ([sluice.Decision.Source]), so that
// middleware, logs and metrics can report degraded mode, and
// [WithStateChange] reports each change of the breaker's state once.
//
// # What a timed-out call means
//
// The script may still run after the decorator has given up on it: a call
// that timed out may have consumed from the shared limit. See
// docs/failure.md.
//
// The circuit breaker is sony/gobreaker (v2), whose settings are
// predicates (ReadyToTrip, IsSuccessful, IsExcluded): the classification
// above is expressed through them.
package fallback
