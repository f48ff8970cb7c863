// Package redistest starts throwaway redis-server processes for tests: a
// single server ([StartRedis], or [SharedRedis] for the tests of one test
// binary), a replica of one ([StartReplica]), a Redis Cluster
// ([StartCluster], [StartReplicatedCluster], [SharedCluster]) and a primary
// with a replica watched by three sentinels ([StartSentinelGroup]). Each
// process listens on a free loopback port, keeps nothing on disk, and is
// stopped when its test ends (the shared ones by [Main]); tests kill, stall,
// restart and flush them through [RedisServer].
//
// Every function that starts a process calls [RequireRedisServer] first.
// When redis-server is not on the PATH the test skips with a clear message,
// unless the environment sets SLUICE_REQUIRE_REDIS=1 ([RequireRedisEnv];
// CI does), in which case it fails.
package redistest
