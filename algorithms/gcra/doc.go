// Package gcra is the generic cell rate algorithm (GCRA), the virtual
// scheduling form of a leaky bucket, kept in Redis and updated by one Lua
// script per decision.
//
// # How it reads a Limit
//
// Requests are spaced by an emission interval T = Period / Rate (rounded up
// to a whole microsecond), and may arrive early by up to the tolerance,
// Burst × T. The state is one number, the theoretical arrival time (TAT) of
// the next request at the regular rate; a request of cost n conforms when
// max(TAT, now) + n × T - now <= Burst × T, and then moves the TAT by n × T.
// An idle key therefore allows Burst at once, then Rate per Period; over any
// interval T, at most Burst + Rate × T / Period.
//
// GCRA and the token bucket (package tokenbucket) make the same decisions:
// the TAT is exactly the time at which the token bucket would be full again,
// and the conformance suite checks that both algorithms agree on random
// sequences. Choose GCRA where it is the vocabulary you know (it is what
// go-redis/redis_rate and throttled implement); Sluice's version keeps
// integer state, the server clock, honest Retry-After and cost checks.
//
// A cost larger than Burst is an error ([sluice.ErrCostExceedsBurst]). A
// cost of 0 peeks. [Limiter.Refund] moves the TAT back; [Limiter.Reset]
// deletes it.
//
// # Precision
//
// Time is counted in whole microseconds and all arithmetic is on integers
// below 2^53, so the script and its Go model agree exactly. Rounding the
// emission interval up never admits more than the limit; [ValidateLimit]
// rejects limits it would lower by more than 1% (none up to 10,000 per
// second).
//
// # Redis
//
// One key per state, the caller's key plus [KeySuffix], holding one
// integer (int-encoded, about as small as a Redis key gets). Each decision
// is one EVALSHA running TIME, GET and, on admission or refund, SET with PX
// (the time until the TAT plus one second). A denial and a peek write
// nothing. The script touches only its one key, so it runs unchanged on
// Redis Cluster.
package gcra
