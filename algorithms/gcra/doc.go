// Package gcra is the generic cell rate algorithm (GCRA), the virtual
// scheduling form of a leaky bucket, kept in Redis and updated atomically
// by one Lua script per decision.
//
// Requests are spaced by an emission interval of Period / Rate, rounded up
// to a whole microsecond, and may arrive early by up to Burst intervals: an
// idle key allows Burst at once, then Rate per Period, and over any
// interval T at most Burst + Rate × T / Period. GCRA makes the same
// decisions as package tokenbucket (the conformance suite checks that they
// agree); choose it where GCRA is the vocabulary you know. A cost larger
// than Burst is an error wrapping [sluice.ErrCostExceedsBurst]; a cost of 0
// peeks. Rounding the interval up never admits more than the limit, and
// [ValidateLimit] rejects limits it would lower by more than 1%.
//
// [New] takes any [sluice.Store]; the script reads the Redis server's
// clock unless [WithClock] gives one (for tests). [Limiter.Refund] gives
// back what a request did not use, [Limiter.Reset] forgets the key, and the
// Limiter decides batches and leases (for package lease). Its state is one
// key, the caller's key plus [KeySuffix], that expires soon after it is
// back to a full burst, and it runs unchanged on Redis Cluster. Example
// shows a burst, a denial's RetryAfter and a refund.
package gcra
