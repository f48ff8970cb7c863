//go:build unix

package envoydiff_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// TestEnvironmentVariants starts both with SHADOW_MODE=true (every
// OVER_LIMIT answered OK overall, the statuses kept), NEAR_LIMIT_RATIO=0.5,
// RUNTIME_IGNOREDOTFILES=true beside dotfiles that do not load, and
// CACHE_KEY_PREFIX (in each one's keys, which differ).
func TestEnvironmentVariants(t *testing.T) {
	awaitWindow(t, 2*time.Minute)
	p := startPair(t, pairConfig{
		files: map[string]string{
			"main.yaml":      mainConfig,
			".editor.yaml":   "not: a rate limit file\n",
			".hidden/x.yaml": "domain: diff\n",
		},
		env: map[string]string{"SHADOW_MODE": "true", "NEAR_LIMIT_RATIO": "0.5", "RUNTIME_IGNOREDOTFILES": "true", "CACHE_KEY_PREFIX": "pfx"},
	})
	for _, want := range []string{"OK [OK 2]", "OK [OK 1]", "OK [OK 0]", "OK [OVER_LIMIT 0]", "OK [OVER_LIMIT 0]"} {
		requireCodes(t, p.same(t, overGRPC, buildRequest("diff", desc("user", "v"))), want)
	}
	p.metricsAre(t, series{
		`ratelimit_service_rate_limit_total_hits{domain="diff",key1="user"}`:   5,
		`ratelimit_service_rate_limit_within_limit{domain="diff",key1="user"}`: 3,
		`ratelimit_service_rate_limit_near_limit{domain="diff",key1="user"}`:   2,
		`ratelimit_service_rate_limit_over_limit{domain="diff",key1="user"}`:   2,
	}, `ratelimit_service_rate_limit_total_hits{domain="diff",key1="user"}`,
		`ratelimit_service_rate_limit_within_limit{domain="diff",key1="user"}`,
		`ratelimit_service_rate_limit_near_limit{domain="diff",key1="user"}`,
		`ratelimit_service_rate_limit_over_limit{domain="diff",key1="user"}`)
	p.sameMetrics(t, decisionMetrics("diff")...)
	p.sameMetrics(t, "ratelimit_service_global_shadow_mode", "ratelimit_service_config_load")
	// CACHE_KEY_PREFIX is in every key, in the key form of each.
	for _, s := range p.both() {
		redis := p.theirRedis
		if s == p.ours {
			redis = p.ourRedis
		}
		keys := redis.keys(t)
		if len(keys) != 1 || !strings.Contains(keys[0], "pfx") {
			t.Fatalf("%s keeps the keys %q; want one, with CACHE_KEY_PREFIX pfx in it", s.name, keys)
		}
		t.Logf("%s: %q", s.name, keys)
	}
}

// TestDirectoryWatch runs with RUNTIME_WATCH_ROOT=false: then a file
// written, created or removed in the app directory reloads the files.
func TestDirectoryWatch(t *testing.T) {
	awaitWindow(t, 2*time.Minute)
	p := startPair(t, pairConfig{
		files: map[string]string{"r.yaml": reloadBefore},
		env:   map[string]string{"RUNTIME_WATCH_ROOT": "false"},
	})
	requireCodes(t, p.same(t, overGRPC, buildRequest("r", desc("user", "a"))), "OK [OK 2]")
	dir := p.runtime.configDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("r.yaml", reloadAfter) // written in place
	p.awaitLimit(t, 5)
	requireCodes(t, p.same(t, overGRPC, buildRequest("r", desc("user", "a"))), "OK [OK 3]")

	write("s.yaml", "domain: s\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 2}\n") // created
	awaitCodes(t, p, buildRequest("s", withHits(desc("k", "probe"), 0)), "OK [OK 2]")
	requireCodes(t, p.same(t, overGRPC, buildRequest("s", desc("k", "x"))), "OK [OK 1]")

	if err := os.Remove(filepath.Join(dir, "s.yaml")); err != nil { // removed
		t.Fatal(err)
	}
	awaitCodes(t, p, buildRequest("s", withHits(desc("k", "probe"), 0)), "OK [OK 0]")
	p.sameMetrics(t, decisionMetrics("r")...)
}

// awaitCodes waits up to 20 s until every service answers req (sent over
// gRPC, which should not charge: a check-only hits_addend) with want.
func awaitCodes(t *testing.T, p *pair, req *rlsv3.RateLimitRequest, want string) {
	t.Helper()
	for _, s := range p.both() {
		deadline := time.Now().Add(20 * time.Second)
		for got := codesOf(s.send(t, overGRPC, req)); got != want; got = codesOf(s.send(t, overGRPC, req)) {
			if time.Now().After(deadline) {
				t.Fatalf("%s still answers %s, not %s, 20 s after the files changed", s.name, got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
