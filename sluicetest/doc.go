// Package sluicetest is Sluice's conformance kit, for the authors of an
// algorithm or a store as much as for Sluice's own tests: it depends only
// on Sluice's core (sluice, ext and the in-process memstore) and the
// standard library.
//
//   - [RunConformance] holds an algorithm, described by an [Algorithm], to
//     its contract on a [Tier] (a store and a way to look at what it
//     stored): its hand-worked [Vector]s, random sequences checked against
//     its Go twin on the in-process store ([MemTier]), batches decided as
//     one by one, validation of bad input, and its state's keys and TTLs.
//     Run it on every tier the algorithm or store is meant for: the same
//     decisions are expected on each.
//   - [Capabilities] and [OwnCapabilities] check that a limiter's optional
//     interfaces are truthful; [AllowOnly], [RecordingLeaser] and
//     [CountingStore] are fakes for decorator tests; [FakeClock] and
//     [Epoch] move time.
//
// Packages of their own hold what costs more: sluicetest/redistest starts
// throwaway redis-server, Cluster and Sentinel processes and makes tiers on
// them (go-redis and rueidis); sluicetest/scripttest fuzzes an algorithm's
// Lua script against its Go twin on a redis-server; sluicetest/builtins
// describes Sluice's own algorithms and decorators for its tests.
package sluicetest
