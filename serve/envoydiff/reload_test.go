//go:build unix

package envoydiff_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

const (
	reloadBefore = "domain: r\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 3}\n  - key: gone\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"
	reloadAfter  = "domain: r\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 5}\n"
	reloadEdited = "domain: r\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"
	reloadBad    = "domain: r\ndescriptors:\n  - key: user\n    rate_limt: {unit: hour, requests_per_unit: 9}\n"
)

// limitOf asks s, without charging (hits_addend 0), for the limit in force
// for user=probe in domain r, and returns its requests_per_unit.
func limitOf(t *testing.T, s *service) uint32 {
	t.Helper()
	r := s.send(t, overGRPC, buildRequest("r", withHits(desc("user", "probe"), 0)))
	if r.resp == nil {
		t.Fatalf("%s: %d %s", s.name, r.code, r.body)
	}
	return r.resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit()
}

// awaitLimit waits up to 20 s until every service answers the limit want.
func (p *pair) awaitLimit(t *testing.T, want uint32) {
	t.Helper()
	for _, s := range p.both() {
		deadline := time.Now().Add(20 * time.Second)
		for got := limitOf(t, s); got != want; got = limitOf(t, s) {
			if time.Now().After(deadline) {
				t.Fatalf("%s still answers a limit of %d, not %d, 20 s after the runtime root was swapped", s.name, got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestReload swaps the RUNTIME_ROOT symlink as Kubernetes updates a
// ConfigMap volume: both services load the new files, keep the counters
// of the rules they keep, ignore an edit made in place inside the old
// target, and keep the files in force when the new set does not load.
func TestReload(t *testing.T) {
	awaitWindow(t, 2*time.Minute)
	p := startPair(t, pairConfig{files: map[string]string{"r.yaml": reloadBefore}})
	requireCodes(t, p.same(t, overGRPC, buildRequest("r", desc("user", "a"))), "OK [OK 2]")
	requireCodes(t, p.same(t, overGRPC, buildRequest("r", desc("gone", "a"))), "OK [OK 0]")

	p.runtime.swap(t, map[string]string{"r.yaml": reloadAfter})
	p.awaitLimit(t, 5)
	requireCodes(t, p.same(t, overGRPC, buildRequest("r", desc("user", "a"))), "OK [OK 3]") // the count kept
	requireCodes(t, p.same(t, overGRPC, buildRequest("r", desc("gone", "a"))), "OK [OK 0]") // no rule now

	// An edit in place, inside the directory the root points to, is not
	// a swap of the root: neither service reloads it. Watched for 3 s
	// (three times sluice-serve's poll of the files).
	edited := filepath.Join(p.runtime.configDir(), "r.yaml")
	if err := os.WriteFile(edited, []byte(reloadEdited), 0o644); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		for _, s := range p.both() {
			if got := limitOf(t, s); got != 5 {
				t.Fatalf("%s reloaded a file edited in place (limit %d); only a swap of the root reloads", s.name, got)
			}
		}
	}

	// A set that does not load is refused as a whole: the files in force
	// stay, and the failure is counted.
	p.runtime.swap(t, map[string]string{"r.yaml": reloadBad})
	p.metricsAre(t, series{
		"ratelimit_service_config_load_success": 2,
		"ratelimit_service_config_load_error":   1,
	}, "ratelimit_service_config_load")
	requireCodes(t, p.same(t, overGRPC, buildRequest("r", desc("user", "a"))), "OK [OK 2]")

	p.runtime.swap(t, map[string]string{"r.yaml": reloadBefore})
	p.awaitLimit(t, 3)
	requireCodes(t, p.same(t, overGRPC, buildRequest("r", withHits(desc("user", "a"), 0))), "OK [OK 0]") // 3 of 3
	p.sameMetrics(t, decisionMetrics("r")...)
}

// TestMergeDomainConfig loads two files of one domain, one of them in a
// subdirectory, with MERGE_DOMAIN_CONFIG=true: the rules of both answer.
// (Without it, the same files are a bad configuration:
// TestDeliberateDifferences/BadConfigurationAtStart.)
func TestMergeDomainConfig(t *testing.T) {
	awaitWindow(t, 2*time.Minute)
	p := startPair(t, pairConfig{
		files: map[string]string{
			"a.yaml":     "domain: m\ndescriptors:\n  - key: x\n    rate_limit: {unit: hour, requests_per_unit: 2}\n",
			"sub/b.yaml": "domain: m\ndescriptors:\n  - key: y\n    rate_limit: {unit: day, requests_per_unit: 3}\n",
		},
		env: map[string]string{"MERGE_DOMAIN_CONFIG": "true"},
	})
	requireCodes(t, p.same(t, overGRPC, buildRequest("m", desc("x", "1"), desc("y", "1"))), "OK [OK 1, OK 2]")
	requireCodes(t, p.same(t, overJSON, buildRequest("m", desc("y", "1"))), "OK [OK 1]")
	p.sameMetrics(t, decisionMetrics("m")...)
}

// TestResponseHeaders turns on LIMIT_RESPONSE_HEADERS_ENABLED with two of
// the three header names changed: the headers describe the descriptor
// closest to its limit, or the one over it.
func TestResponseHeaders(t *testing.T) {
	awaitWindow(t, 2*time.Minute)
	p := startPair(t, pairConfig{
		files: map[string]string{"main.yaml": mainConfig},
		env: map[string]string{
			"LIMIT_RESPONSE_HEADERS_ENABLED": "true",
			"LIMIT_LIMIT_HEADER":             "X-Limit",
			"LIMIT_REMAINING_HEADER":         "X-Left",
		},
	})
	for _, c := range []struct {
		req         []any
		limit, left string
		wantHeaders bool
		codes       string
	}{
		{[]any{desc("user", "h")}, "3", "2", true, "OK [OK 2]"},
		{[]any{desc("user", "h"), desc("path", "/other")}, "3", "1", true, "OK [OK 1, OK 5]"},
		{[]any{desc("path", "/other"), desc("user", "vip")}, "6", "4", true, "OK [OK 4, OK 4]"},
		{[]any{desc("user", "h"), desc("blocked", "h")}, "0", "0", true, "OVER_LIMIT [OK 0, OVER_LIMIT 0]"},
		{[]any{desc("nolimit", "h")}, "", "", false, "OK [OK 0]"},
		{[]any{desc("internal", "h")}, "", "", false, "OK [OK 4294967295]"},
	} {
		r := p.same(t, overGRPC, buildRequest("diff", c.req...))
		requireCodes(t, r, c.codes)
		got := map[string]string{}
		for _, h := range r.resp.GetResponseHeadersToAdd() {
			got[h.GetKey()] = h.GetValue()
		}
		if !c.wantHeaders {
			if len(got) != 0 {
				t.Fatalf("theirs added headers %v to %v", got, c.req)
			}
			continue
		}
		if got["X-Limit"] != c.limit || got["X-Left"] != c.left || got["RateLimit-Reset"] == "" || len(got) != 3 {
			t.Fatalf("theirs added headers %v to %v; the case expects X-Limit %s, X-Left %s and RateLimit-Reset", got, c.req, c.limit, c.left)
		}
	}
	r := p.same(t, overJSON, buildRequest("diff", desc("user", "j")))
	requireCodes(t, r, "OK [OK 2]")
	if len(r.resp.GetResponseHeadersToAdd()) != 3 {
		t.Fatalf("theirs added %v over POST /json", r.resp.GetResponseHeadersToAdd())
	}
}

// TestRedisTypes runs a short sequence with REDIS_TYPE=cluster and
// REDIS_TYPE=sentinel, each service on a Redis Cluster, or a sentinel
// group, of its own, and holds the decision and Redis pool metrics equal.
func TestRedisTypes(t *testing.T) {
	t.Run("Cluster", func(t *testing.T) { testRedisType(t, cluster) })
	t.Run("Sentinel", func(t *testing.T) { testRedisType(t, sentinel) })
}

func testRedisType(t *testing.T, kind redisKind) {
	awaitWindow(t, 2*time.Minute)
	p := startPair(t, pairConfig{files: map[string]string{"main.yaml": mainConfig}, redis: kind})
	for _, want := range []string{"OK [OK 2, OK 1]", "OK [OK 1, OK 0]", "OVER_LIMIT [OK 0, OVER_LIMIT 0]"} {
		requireCodes(t, p.same(t, overGRPC, buildRequest("diff", desc("user", "c"), desc("tenant", "t", "route", "/orders"))), want)
	}
	requireCodes(t, p.same(t, overJSON, buildRequest("diff", hitsAddend(3), desc("path", "/api/c"))), "OK [OK 1]")
	p.sameMetrics(t, decisionMetrics("diff")...)
	// The pool's series (TestProcessMetrics), every node's connections
	// (the primary's under Sentinel) counted.
	theirs, ours := p.sameProcessMetrics(t, "ratelimit_redis_pool_")
	t.Logf("theirs: %s; ours: %s", poolCounts(theirs), poolCounts(ours))
	for _, m := range []map[string]sample{theirs, ours} {
		if m["ratelimit_redis_pool_cx_active"].v < 1 {
			t.Fatalf("ratelimit_redis_pool_cx_active: theirs: %s; ours: %s; want at least 1 each", poolCounts(theirs), poolCounts(ours))
		}
	}
}
