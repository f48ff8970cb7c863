//go:build unix

package envoydiff_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
)

// TestDeliberateDifferences holds each place where sluice-serve differs
// from envoyproxy/ratelimit on purpose (docs/serve.md lists them): what
// theirs does, and what Sluice does instead.
func TestDeliberateDifferences(t *testing.T) {
	t.Run("BadConfigurationAtStart", testBadConfigurationAtStart)
	t.Run("SIGHUP", testSIGHUP)
	t.Run("DenialsAreNotCharged", testDenialsAreNotCharged)
	t.Run("MixedUpgradeCountsTwice", testMixedUpgradeCountsTwice)
	t.Run("ShadowModeOverLimitIsNotCharged", testShadowModeOverLimitIsNotCharged)
	t.Run("RepeatedDenialsAreCountedAsDecided", testRepeatedDenialsAreCountedAsDecided)
	t.Run("AnOverrideOfUnitUnknown", testAnOverrideOfUnitUnknown)
	t.Run("SubdirectoryUnset", testSubdirectoryUnset)
	t.Run("KeyGivenTwice", testKeyGivenTwice)
}

// testBadConfigurationAtStart: with files that do not load, theirs starts,
// reports itself healthy and answers every call with gRPC Unknown, which
// Envoy's default failure_mode_deny: false turns into allowing
// everything; sluice-serve refuses to start and names the file.
func testBadConfigurationAtStart(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"UnknownKey": {"bad.yaml": "domain: b\ndescriptors:\n  - key: user\n    rate_limt: {unit: hour, requests_per_unit: 1}\n"},
		"DomainInTwoFiles": {
			"a.yaml": "domain: m\ndescriptors:\n  - key: x\n    rate_limit: {unit: hour, requests_per_unit: 2}\n",
			"b.yaml": "domain: m\ndescriptors:\n  - key: y\n    rate_limit: {unit: hour, requests_per_unit: 2}\n",
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := startPair(t, pairConfig{files: files, noWait: true})
			p.theirs.ready(t)
			r := p.theirs.send(t, overGRPC, buildRequest("b", desc("user", "a")))
			if r.code != int(codes.Unknown) || r.body != "no rate limit configuration loaded" {
				t.Fatalf("theirs answered %s; the case expects gRPC Unknown, no rate limit configuration loaded", codesOf(r))
			}
			if r := p.theirs.send(t, overJSON, buildRequest("b", desc("user", "a"))); r.code != http.StatusBadRequest {
				t.Fatalf("theirs answered POST /json with %d, the case expects 400", r.code)
			}
			code := p.ours.wait(t)
			out := p.ours.output()
			if code == 0 || !(strings.Contains(out, "bad.yaml") || strings.Contains(out, "b.yaml")) {
				t.Fatalf("sluice-serve exited %d with files that do not load; it should refuse to start, naming the file:\n%s", code, out)
			}
		})
	}
}

// testSIGHUP: SIGHUP stops theirs (it shuts down as on SIGTERM, exit 0);
// sluice-serve reloads its files on SIGHUP, even an edit made in place
// that the watch of the root does not see.
func testSIGHUP(t *testing.T) {
	p := startPair(t, pairConfig{files: map[string]string{"r.yaml": reloadBefore}})
	edited := filepath.Join(p.runtime.configDir(), "r.yaml")
	if err := os.WriteFile(edited, []byte(reloadAfter), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.theirs.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if code := p.theirs.wait(t); code != 0 {
		t.Fatalf("theirs exited %d on SIGHUP; the case expects 0 (its graceful shutdown)", code)
	}
	if err := p.ours.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for got := limitOf(t, p.ours); got != 5; got = limitOf(t, p.ours) {
		if p.ours.exited() || time.Now().After(deadline) {
			t.Fatalf("sluice-serve did not reload on SIGHUP (limit %d, exited %v):\n%s", got, p.ours.exited(), p.ours.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if why := p.ours.probe(); why != "" {
		t.Fatalf("sluice-serve unhealthy after SIGHUP: %s", why)
	}
}

// theirKey is the form of envoyproxy/ratelimit's Redis keys:
// <domain>_<key>_<value>_..._<window start in Unix seconds>.
var theirKey = regexp.MustCompile(`^diff_user_(charged|addend)_\d+$`)

// testDenialsAreNotCharged: theirs adds every request to the count,
// denied or not (its INCRBY comes before the comparison), so a client that
// keeps calling while denied stays denied longer; Sluice charges only what
// it admits. Both answer the same while over the limit; raising the limit
// (descriptor.limit, on the same counter) shows the counts. Their Redis
// keys differ too: a rolling upgrade that mixes the two counts each
// request against two keys.
func testDenialsAreNotCharged(t *testing.T) {
	awaitWindow(t, 2*time.Minute)
	p := startPair(t, pairConfig{files: map[string]string{"main.yaml": mainConfig}})
	for _, want := range []string{"OK [OK 2]", "OK [OK 1]", "OK [OK 0]", "OVER_LIMIT [OVER_LIMIT 0]", "OVER_LIMIT [OVER_LIMIT 0]"} {
		requireCodes(t, p.same(t, overGRPC, buildRequest("diff", desc("user", "charged"))), want)
	}
	// A hits_addend above the limit is denied, and theirs charges all of it.
	requireCodes(t, p.same(t, overGRPC, buildRequest("diff", withHits(desc("user", "addend"), 4))), "OVER_LIMIT [OVER_LIMIT 0]")

	raise := func(value string) *rlsv3.RateLimitRequest {
		return buildRequest("diff", withHits(withLimit(desc("user", value), 10, typev3.RateLimitUnit_HOUR), 0))
	}
	// theirs counted 5 of 5 calls and 4 of a denied 4; Sluice 3 and 0.
	requireCodes(t, p.theirs.send(t, overGRPC, raise("charged")), "OK [OK 5]")
	requireCodes(t, p.theirs.send(t, overGRPC, raise("addend")), "OK [OK 6]")
	theirKeys := p.theirRedis.keys(t)
	if len(theirKeys) != 2 || !theirKey.MatchString(theirKeys[0]) || !theirKey.MatchString(theirKeys[1]) {
		t.Fatalf("theirs keeps the keys %q; the case expects two of the form %s", theirKeys, theirKey)
	}
	if r := p.ours.send(t, overGRPC, raise("charged")); codesOf(r) != "OK [OK 7]" {
		t.Fatalf("sluice-serve answered %s after 3 admitted and 2 denied calls under a limit raised to 10; want OK [OK 7] (denials not charged)", codesOf(r))
	}
	if r := p.ours.send(t, overGRPC, raise("addend")); codesOf(r) != "OK [OK 10]" {
		t.Fatalf("sluice-serve answered %s after a denied hits_addend of 4; want OK [OK 10]", codesOf(r))
	}
	ourKeys := p.ourRedis.keys(t)
	if len(ourKeys) == 0 {
		t.Fatal("sluice-serve keeps no key in its Redis")
	}
	for _, k := range ourKeys {
		for _, their := range theirKeys {
			if k == their {
				t.Fatalf("sluice-serve keeps %q, as theirs does: the keys were expected to differ", k)
			}
		}
	}
	t.Logf("the same requests, keyed in Redis:\ntheirs: %q\nours:   %q", theirKeys, ourKeys)
}

// testMixedUpgradeCountsTwice: theirs and ours on one redis-server, as
// during a rolling upgrade from one to the other, keep separate counts
// (their keys differ), so a client whose calls are spread over both is
// admitted the limit by each: 3 + 3 under a limit of 3 an hour.
func testMixedUpgradeCountsTwice(t *testing.T) {
	awaitWindow(t, 2*time.Minute)
	p := startPair(t, pairConfig{files: map[string]string{"main.yaml": mainConfig}, shared: true})
	req := buildRequest("diff", desc("user", "rolling"))
	for _, s := range p.both() {
		for _, want := range []string{"OK [OK 2]", "OK [OK 1]", "OK [OK 0]"} {
			if got := codesOf(s.send(t, overGRPC, req)); got != want {
				t.Fatalf("%s answered %s, want %s: one redis-server, two counts", s.name, got, want)
			}
		}
	}
	for _, s := range p.both() {
		requireCodes(t, s.send(t, overGRPC, req), "OVER_LIMIT [OVER_LIMIT 0]")
	}
	if keys := p.theirRedis.keys(t); len(keys) != 2 {
		t.Fatalf("the shared redis-server holds %q; want one key of each", keys)
	}
}

// testShadowModeOverLimitIsNotCharged: a shadow_mode rule answers OK over
// its limit, on both; theirs counts that request, Sluice does not (it was
// over the limit: the rule above, applied to a decision shadow_mode turns
// into OK). The answers agree until the limit is raised over the counter.
func testShadowModeOverLimitIsNotCharged(t *testing.T) {
	awaitWindow(t, 2*time.Minute)
	p := startPair(t, pairConfig{files: map[string]string{"main.yaml": mainConfig}})
	for range 2 {
		requireCodes(t, p.same(t, overGRPC, buildRequest("diff", desc("shadow", "uncharged"))), "OK [OK 0]")
	}
	raised := buildRequest("diff", withHits(withLimit(desc("shadow", "uncharged"), 10, typev3.RateLimitUnit_HOUR), 0))
	requireCodes(t, p.theirs.send(t, overGRPC, raised), "OK [OK 8]")
	if r := p.ours.send(t, overGRPC, raised); codesOf(r) != "OK [OK 9]" {
		t.Fatalf("sluice-serve answered %s after 1 admitted and 1 shadow-mode call over a limit of 1, under a limit raised to 10; want OK [OK 9]", codesOf(r))
	}
}

// testRepeatedDenialsAreCountedAsDecided: the metrics follow each side's
// counter. After a denial, theirs holds more than the limit, so each later
// denied request counts all its hits over_limit; Sluice's counter holds
// only what it admitted, so each later denial of 2 hits on a counter of 5
// under a limit of 6 counts 1 over_limit and 1 near_limit, as the first
// did. Both answer the same; total_hits and within_limit agree.
func testRepeatedDenialsAreCountedAsDecided(t *testing.T) {
	awaitWindow(t, 2*time.Minute)
	p := startPair(t, pairConfig{files: map[string]string{"main.yaml": mainConfig}})
	requireCodes(t, p.same(t, overGRPC, buildRequest("diff", withHits(desc("path", "/repeat"), 5))), "OK [OK 1]")
	for range 3 {
		requireCodes(t, p.same(t, overGRPC, buildRequest("diff", withHits(desc("path", "/repeat"), 2))), "OVER_LIMIT [OVER_LIMIT 0]")
	}
	p.theirs.flushed(t)
	sums := func(s *service) string {
		got := map[string]float64{}
		for name, v := range s.scrape(t, decisionMetrics("diff")...) {
			got[strings.TrimPrefix(name[:strings.IndexByte(name, '{')], "ratelimit_service_rate_limit_")] += v
		}
		return fmt.Sprintf("total_hits %g, within_limit %g, near_limit %g, over_limit %g",
			got["total_hits"], got["within_limit"], got["near_limit"], got["over_limit"])
	}
	if got, want := sums(p.theirs), "total_hits 11, within_limit 5, near_limit 2, over_limit 5"; got != want {
		t.Fatalf("envoyproxy/ratelimit counted %s; the case expects %s", got, want)
	}
	if got, want := sums(p.ours), "total_hits 11, within_limit 5, near_limit 4, over_limit 3"; got != want {
		t.Fatalf("sluice-serve counted %s; want %s (each denial of 2 on an uncharged counter of 5: 1 over, 1 near)", got, want)
	}
}

// testAnOverrideOfUnitUnknown: a per-request override whose unit is
// UNKNOWN makes theirs panic ("should not get here", re-raised past its
// recover) and, over gRPC, which recovers nothing, the whole process dies:
// one request stops the service for every caller. sluice-serve answers
// that call gRPC Unknown and goes on serving.
func testAnOverrideOfUnitUnknown(t *testing.T) {
	awaitWindow(t, 2*time.Minute)
	p := startPair(t, pairConfig{files: map[string]string{"main.yaml": mainConfig}})
	bad := buildRequest("diff", withLimit(desc("user", "unknown-unit"), 5, typev3.RateLimitUnit_UNKNOWN))
	if r := p.theirs.send(t, overGRPC, bad); r.code == int(codes.OK) {
		t.Fatalf("theirs answered an override of unit UNKNOWN: %s", codesOf(r))
	}
	if code := p.theirs.wait(t); code == 0 {
		t.Fatalf("theirs exited 0 after an override of unit UNKNOWN; the case expects its panic's exit")
	}
	r := p.ours.send(t, overGRPC, bad)
	if r.code != int(codes.Unknown) || !strings.Contains(r.body, "UNKNOWN") {
		t.Fatalf("sluice-serve answered %d %q; want gRPC Unknown naming the unit", r.code, r.body)
	}
	requireCodes(t, p.ours.send(t, overGRPC, buildRequest("diff", desc("user", "after"))), "OK [OK 2]")
	if why := p.ours.probe(); why != "" {
		t.Fatalf("sluice-serve unhealthy after the call: %s", why)
	}
}

// testSubdirectoryUnset: with RUNTIME_SUBDIRECTORY unset, goruntime makes
// theirs a loader that loads nothing, so every request is allowed with no
// limit; sluice-serve loads $RUNTIME_ROOT/$RUNTIME_APPDIRECTORY, enforces
// it and warns that theirs would not.
func testSubdirectoryUnset(t *testing.T) {
	awaitWindow(t, 2*time.Minute)
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, appDirectory), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, appDirectory, "main.yaml"), []byte(mainConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startPair(t, pairConfig{env: map[string]string{"RUNTIME_ROOT": root, "RUNTIME_SUBDIRECTORY": ""}})
	req := buildRequest("diff", desc("user", "nosubdir"))
	for range 4 {
		requireCodes(t, p.theirs.send(t, overGRPC, req), "OK [OK 0]")
	}
	for _, want := range []string{"OK [OK 2]", "OK [OK 1]", "OK [OK 0]", "OVER_LIMIT [OVER_LIMIT 0]"} {
		if got := codesOf(p.ours.send(t, overGRPC, req)); got != want {
			t.Fatalf("sluice-serve answered %s, want %s: it loads the app directory under RUNTIME_ROOT", got, want)
		}
	}
	if out := p.ours.output(); !strings.Contains(out, "RUNTIME_SUBDIRECTORY is empty") {
		t.Fatalf("sluice-serve did not warn that theirs loads nothing here:\n%s", out)
	}
}

// testKeyGivenTwice: a YAML mapping that gives rate_limit twice loads in
// theirs (the two merged, the last value of each field winning, only the
// last one's keys validated); sluice-serve refuses to start, naming the
// key and both lines.
func testKeyGivenTwice(t *testing.T) {
	const twice = "domain: twice\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 3}\n    rate_limit: {requests_per_unit: 5}\n"
	p := startPair(t, pairConfig{files: map[string]string{"twice.yaml": twice}, noWait: true})
	p.theirs.ready(t)
	requireCodes(t, p.theirs.send(t, overGRPC, buildRequest("twice", desc("user", "a"))), "OK [OK 4]")
	code := p.ours.wait(t)
	if out := p.ours.output(); code == 0 || !strings.Contains(out, "twice.yaml") || !strings.Contains(out, "given twice") {
		t.Fatalf("sluice-serve exited %d; it should refuse to start, naming the file and the key given twice:\n%s", code, out)
	}
}
