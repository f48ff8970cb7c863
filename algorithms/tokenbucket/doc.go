// Package tokenbucket is Sluice's default algorithm: a token bucket kept in
// Redis and updated by one Lua script per decision.
//
// # Semantics
//
// A bucket holds up to Limit.Burst tokens and refills continuously at
// Limit.Rate tokens per Limit.Period. A request of cost n is allowed when n
// tokens are in the bucket, and takes them. An idle client can therefore
// send Burst requests at once, then Rate per Period. Over any interval of
// length T, a key admits at most Burst + Rate × T / Period cost units.
//
// A cost larger than Burst can never be allowed; AllowN returns an error
// wrapping [sluice.ErrCostExceedsBurst] for it instead of a denial. A cost
// of 0 peeks: the Decision says whether a cost-1 request would be allowed
// and nothing is consumed.
//
// # Clock and precision
//
// The script reads the Redis server clock (TIME) by default, so clock skew
// between pods cannot mint or drain tokens. [WithClock] sends the caller's
// time instead (client-clock mode, for tests and for callers that must
// decide on their own clock); then all callers of one key should share a
// well-synchronised clock, and a clock that runs behind other callers' only
// ever makes its own requests wait longer.
//
// Time is counted in whole microseconds and all arithmetic is on integers,
// so the script and its Go model agree exactly. The refill interval of one
// token is Period / Rate rounded up to a whole microsecond: a full burst
// always fits, the enforced rate is never above Rate, and [ValidateLimit]
// rejects limits where the rounding would lower it by more than 1% (none up
// to 10,000 per second; above that, choose a Rate that divides Period).
//
// A clock that goes backwards (a server failover to a host whose clock is
// behind, or a client clock in client-clock mode) only makes the bucket look
// emptier; it never mints tokens.
//
// # Redis
//
// One key per bucket, the caller's key plus [KeySuffix], holding one integer
// (int-encoded by Redis), the time the bucket will be full again; each
// decision is one EVALSHA running TIME, GET and, when a request is allowed,
// SET with PX. A denial and a peek write nothing. The TTL is the time until
// the bucket is full plus one second, so idle keys vanish and memory tracks
// active keys only. The script touches only the key it is given, so it runs
// unchanged on Redis Cluster; build keys with [sluice.Key].
//
// The script's Go twin runs in process through [memstore], which is how the
// package's pure-Go model doubles as an in-process limiter; the script itself
// runs on the embedded miniredis through [embedded].
//
// [memstore]: https://pkg.go.dev/github.com/sluicehq/sluice/store/memstore
// [embedded]: https://pkg.go.dev/github.com/sluicehq/sluice/store/embedded
package tokenbucket
