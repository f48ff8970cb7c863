// Package envoydiff holds the differential test of sluice-serve against
// envoyproxy/ratelimit itself: a module of its own, so that the real
// envoyproxy/ratelimit (installed as a Go module, at the version below,
// and cached) never enters the dependencies of Sluice's modules.
//
// The test starts both services on loopback, each with its own
// redis-server (or Redis Cluster), on the same runtime directory and the
// same environment, sends them the same requests over gRPC and POST
// /json, and compares every field of the answers and the Prometheus
// metrics they expose. Where Sluice differs on purpose, the test asserts
// the difference: what envoyproxy/ratelimit does, and what Sluice does
// instead.
//
//	cd serve/envoydiff && SLUICE_REQUIRE_REDIS=1 go test -race -count=1 ./...
//
// The first run installs envoyproxy/ratelimit into
// os.UserCacheDir()/sluice/envoydiff/<version>/ (about 100 s); later runs
// reuse it. Without SLUICE_REQUIRE_REDIS=1 a failed install (no network,
// no module proxy) or a missing redis-server skips the test, saying why;
// with it, either fails the test.
package envoydiff
