// Package sluicetest holds what Sluice's tests share: the conformance suite
// that every tier runs (the Go model on the in-process store, the Lua
// scripts on the embedded miniredis, and on real redis-server processes
// through go-redis and rueidis), a fake clock, and a harness that starts
// and stops throwaway redis-server processes on free loopback ports.
//
// Real-Redis tests call [RequireRedisServer] (directly or through
// [StartRedis] and [SharedRedis]). When redis-server is not on the PATH
// they skip with a clear message, unless the environment sets
// SLUICE_REQUIRE_REDIS=1 (CI does), in which case they fail: with that
// variable set, no test of the suite can skip.
//
// Multi-process tests start the test binary again as workers ([Main]
// turns such a copy into a worker instead of running tests): [RunJob]
// for any work a package registers with [RegisterJob], and [RunLoad], a
// job of its own, for one algorithm on one key; [OpenStore] connects a
// worker to real Redis.
package sluicetest
