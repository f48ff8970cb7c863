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
// Time is counted in whole microseconds. The state is the time at which the
// bucket will be full again, rounded up to the next microsecond at each
// admission, so rounding only ever admits less, never more. At very high
// rates (more than one token per microsecond) each admitted request costs at
// least one microsecond of refill.
//
// A clock that goes backwards (a server failover to a host whose clock is
// behind, or a client clock in client-clock mode) only makes the bucket look
// emptier; it never mints tokens.
//
// # Redis
//
// One key per bucket holding one integer (int-encoded by Redis); each
// decision is one EVALSHA running TIME, GET and, when a request is allowed,
// SET with PX. A denial and a peek write nothing. The TTL is the time until
// the bucket is full plus one second, so idle keys vanish and memory tracks
// active keys only. The script touches only the key it is given, so it runs
// unchanged on Redis Cluster; build keys with [sluice.Key].
//
// The same script runs in process through [memstore] and on the embedded
// miniredis through [embedded], which is how the package's pure-Go model
// doubles as an in-process limiter.
//
// [memstore]: https://pkg.go.dev/github.com/sluicehq/sluice/store/memstore
// [embedded]: https://pkg.go.dev/github.com/sluicehq/sluice/store/embedded
package tokenbucket
