// Package slidingcounter is a sliding window counter kept in Redis and
// updated by one Lua script per decision: nearly as cheap as a fixed
// window, without its 2x burst at window boundaries.
//
// # How it reads a Limit
//
// Time is cut into windows of Limit.Period aligned to the Unix epoch. The
// count of the last Period is estimated from the current window's count
// and the previous window's, weighted by how much of it still overlaps the
// last Period:
//
//	estimate = prev × (Period − elapsed) / Period + cur
//
// and a request of cost n is allowed when estimate + n <= Limit.Rate.
// Limit.Burst is not used (it must still be valid). A cost larger than Rate
// is an error ([sluice.ErrCostExceedsBurst]); 0 peeks. RetryAfter is the
// earliest time the same request is allowed if nothing else is counted
// meanwhile: later in this window as the previous one fades, or in the
// next.
//
// # Accuracy
//
// The estimate assumes the previous window's requests were spread evenly.
// When they were not, the real number admitted in some interval of length
// Period can exceed Rate, but never 2 × Rate (each window alone never
// exceeds Rate). The real-Redis tests check both that every decision equals
// the formula and the 2 × Rate bound; docs/algorithms.md gives the measured
// worst case.
//
// # Redis
//
// One key per state, the caller's key plus [KeySuffix], holding the string
// "start:cur:prev", start being the current window's start in Unix
// microseconds. Each decision is one EVALSHA running TIME, GET and,
// when a request is allowed, SET with PX until the next window's end plus
// one second. A denial and a peek write nothing. One key per script, so it
// runs unchanged on Redis Cluster.
package slidingcounter
