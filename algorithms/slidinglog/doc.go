// Package slidinglog is a sliding window log kept in Redis and updated by
// one Lua script per decision: exact, at a memory cost proportional to the
// limit.
//
// # How it reads a Limit
//
// The key keeps the time of every admitted cost unit of the last
// Limit.Period. A request of cost n is allowed when the units logged in
// (now − Period, now] plus n are at most Limit.Rate; Limit.Burst is not used
// (it must still be valid). In every interval of length Period, at most
// Rate units are admitted: no boundary effect and no estimate. RetryAfter
// is the time at which enough logged units leave the window. A cost larger
// than Rate is an error ([sluice.ErrCostExceedsBurst]); 0 peeks.
//
// # Cost
//
// Memory and time grow with the limit: one sorted-set member (about 30
// bytes of member, plus Redis's per-member overhead; measured in
// docs/algorithms.md) per admitted unit still in the window, and an
// admission of cost n adds n members. Rate is therefore capped at
// [MaxRate] per Period. Use the sliding window counter for large limits.
//
// # Redis
//
// One sorted set per state, the caller's key plus [KeySuffix], scored by
// microsecond timestamps. Members are "<time>-<sequence>", the sequence
// counted from the members already at that microsecond, so concurrent
// requests in the same microsecond never collide. A decision is one
// EVALSHA: TIME, ZCOUNT and ZREVRANGE; an admission adds ZREMRANGEBYSCORE
// (members out of the window), ZADD and PEXPIRE (until the newest member
// leaves, plus one second). A denial and a peek write nothing. One key per
// script, so it runs unchanged on Redis Cluster.
package slidinglog
