// Package fixedwindow is a fixed window counter kept in Redis and updated
// by one Lua script per decision: the simplest and cheapest algorithm, with
// a known weakness at window boundaries.
//
// # How it reads a Limit
//
// Time is cut into windows of Limit.Period aligned to the Unix epoch (for
// a per-minute limit, each window is a wall-clock minute). Each window
// allows Limit.Rate cost units; Limit.Burst is not used (it must still be
// valid). A request of cost n is allowed when the window's count plus n is
// at most Rate; a denied request may retry when the window ends, which is
// what RetryAfter says. A cost larger than Rate is an error
// ([sluice.ErrCostExceedsBurst]); 0 peeks.
//
// # Accuracy
//
// Within one aligned window the count never exceeds Rate. Across a
// boundary it can: Rate at the end of one window and Rate at the start of
// the next admit 2 × Rate within a time much shorter than Period (the
// boundary attack, demonstrated by a real-Redis test and measured in
// docs/algorithms.md). Use the sliding window counter or the token bucket
// where that matters.
//
// # Redis
//
// One key per state, the caller's key plus [KeySuffix], holding the string
// "start:count" (the window's start in Unix microseconds makes a stale
// count unmistakable, even in client-clock mode or after the period
// changed). Each decision is one EVALSHA running TIME, GET and,
// when a request is allowed, SET with PX until the window's end plus one
// second. A denial and a peek write nothing. One key per script, so it runs
// unchanged on Redis Cluster.
package fixedwindow
