// Package tokenbucket is Sluice's default algorithm: a token bucket kept in
// Redis and updated atomically by one Lua script per decision.
//
// A bucket holds up to Limit.Burst tokens and refills at Limit.Rate per
// Limit.Period; a request of cost n is allowed when n tokens are in the
// bucket, and takes them. Over any interval of length T a key admits at
// most Burst + Rate × T / Period cost units. A cost of 0 peeks (would a
// cost-1 request be allowed?) and takes nothing. A cost larger than Burst
// can never be allowed, so it is an error wrapping
// [sluice.ErrCostExceedsBurst], not a denial.
//
// [New] takes any [sluice.Store]; the Limiter also refunds, resets,
// decides batches and leases (for package lease). Its state is one key,
// the caller's key plus [KeySuffix], that expires soon after the bucket is
// full, and it runs unchanged on Redis Cluster. Example runs on the embedded store;
// ExampleLimiter_AllowN shows weighted requests, a peek and a cost larger
// than Burst.
//
// The script reads the Redis server's clock, so skew between pods cannot
// mint or drain tokens, and a clock that goes back only makes the bucket
// look emptier. [WithClock] sends the caller's time instead (for tests, and
// callers that must decide on their own clock): callers of one key should
// then share a synchronised clock; one behind only makes its own requests
// wait longer. Time is whole microseconds, one token's refill interval
// Period / Rate rounded up: a full burst always fits, the enforced rate is
// never above Rate, and [ValidateLimit] rejects limits that rounding would
// lower by more than 1%.
package tokenbucket
