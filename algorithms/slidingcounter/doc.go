// Package slidingcounter is a sliding window counter kept in Redis and
// updated atomically by one Lua script per decision: nearly as cheap as a
// fixed window, without its 2x burst at window boundaries.
//
// Time is cut into windows of Limit.Period aligned to the Unix epoch. The
// count of the last Period is estimated from the current window's count
// and the previous one's, weighted by how much of it still overlaps:
//
//	estimate = prev × (Period − elapsed) / Period + cur
//
// and a request of cost n is allowed when estimate + n <= Limit.Rate.
// Limit.Burst is not used (it must still be valid). A cost larger than Rate
// is an error wrapping [sluice.ErrCostExceedsBurst]; 0 peeks. RetryAfter is
// the earliest time the same request is allowed if nothing else is counted
// meanwhile. The estimate assumes the previous window's requests were
// spread evenly: when they were not, an interval of length Period can
// admit more than Rate, but never 2 × Rate ([docs/algorithms.md]).
//
// [New] takes any [sluice.Store]; the script reads the Redis server's
// clock unless [WithClock] gives one (for tests). The Limiter refunds (to
// the current window), resets and decides batches; it does not lease, so
// package lease refuses it. Its state is one key, the caller's key plus
// [KeySuffix], that expires once the next window has ended, and it runs
// unchanged on Redis Cluster. Example shows a full window fading into the
// next.
//
// [docs/algorithms.md]: https://github.com/sluicehq/sluice/blob/main/docs/algorithms.md
package slidingcounter
