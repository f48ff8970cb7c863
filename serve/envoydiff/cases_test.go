//go:build unix

package envoydiff_test

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// mainConfig is one envoyproxy/ratelimit file with a rule for each case of
// TestSameAnswers, each counting by the HOUR or the DAY (see awaitWindow).
const mainConfig = `domain: diff
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: user
    value: vip
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: path
    value: /api/exact
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: path
    value: /api*
    rate_limit: {unit: hour, requests_per_unit: 4}
  - key: path
    value: /api/v2*
    rate_limit: {unit: hour, requests_per_unit: 9}
  - key: path
    rate_limit: {unit: day, requests_per_unit: 6}
  - key: tenant
    descriptors:
      - key: route
        value: /orders
        rate_limit: {unit: hour, requests_per_unit: 2}
      - key: route
        rate_limit: {unit: hour, requests_per_unit: 7}
  - key: tenant
    value: acme
    rate_limit: {unit: day, requests_per_unit: 10}
    descriptors:
      - key: route
        rate_limit: {unit: hour, requests_per_unit: 1}
  - key: internal
    rate_limit: {unlimited: true}
  - key: blocked
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: plan
    value: gold
    rate_limit: {name: gold, unit: hour, requests_per_unit: 100}
  - key: org
    rate_limit: {unit: hour, requests_per_unit: 2, replaces: [{name: gold}]}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: detailed
    detailed_metric: true
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: hits
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: nolimit
  - key: files
    value: docs/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: svc
    value_to_metric: true
    descriptors:
      - key: op
        rate_limit: {unit: hour, requests_per_unit: 5}
  - key: quota
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: dotted.key
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: dotted
    descriptors:
      - key: key
        rate_limit: {unit: hour, requests_per_unit: 2}
`

// awaitWindow returns once at least need is left before the next hour
// boundary (which every unit of an hour or longer shares), waiting the
// hour out if it is closer: a boundary inside a case would reset the
// counts of one service and not the other's.
func awaitWindow(t *testing.T, need time.Duration) {
	t.Helper()
	now := time.Now()
	next := now.Truncate(time.Hour).Add(time.Hour)
	if left := next.Sub(now); left < need {
		t.Logf("%s left in this hour, %s needed: waiting for the next", left.Round(time.Second), need)
		time.Sleep(left + time.Second)
	}
}

// TestSameAnswers sends the same requests to envoyproxy/ratelimit and
// sluice-serve, over gRPC and POST /json, and holds every answer and the
// per-rule metrics equal; each step also holds envoyproxy/ratelimit to
// what the case expects of it. Each case uses values of its own, and no
// case asks again for a key after it was denied (Sluice does not charge a
// denial: TestDeliberateDifferences).
func TestSameAnswers(t *testing.T) {
	awaitWindow(t, 2*time.Minute)
	p := startPair(t, pairConfig{files: map[string]string{"main.yaml": mainConfig}})
	check := func(t *testing.T, v via, want string, descs ...any) {
		t.Helper()
		requireCodes(t, p.same(t, v, buildRequest("diff", descs...)), want)
	}
	t.Run("BareKey", func(t *testing.T) {
		check(t, overGRPC, "OK [OK 2]", desc("user", "a"))
		check(t, overGRPC, "OK [OK 1]", desc("user", "a"))
		check(t, overJSON, "OK [OK 0]", desc("user", "a"))
		check(t, overGRPC, "OVER_LIMIT [OVER_LIMIT 0]", desc("user", "a"))
		p.metricsAre(t, series{
			`ratelimit_service_rate_limit_total_hits{domain="diff",key1="user"}`:   4,
			`ratelimit_service_rate_limit_within_limit{domain="diff",key1="user"}`: 3,
			`ratelimit_service_rate_limit_near_limit{domain="diff",key1="user"}`:   1,
			`ratelimit_service_rate_limit_over_limit{domain="diff",key1="user"}`:   1,
		}, decisionMetrics("diff")...)
	})
	t.Run("KeyValueBeforeBareKey", func(t *testing.T) {
		check(t, overGRPC, "OK [OK 4]", desc("user", "vip"))
		check(t, overJSON, "OK [OK 3]", desc("user", "vip"))
	})
	t.Run("Wildcards", func(t *testing.T) {
		check(t, overGRPC, "OK [OK 0]", desc("path", "/api/exact")) // the exact value first
		check(t, overGRPC, "OK [OK 3]", desc("path", "/api/v2/x"))  // the first wildcard in file order
		check(t, overGRPC, "OK [OK 3]", desc("path", "/apix"))      // same rule, a counter of its own
		check(t, overGRPC, "OK [OK 5]", desc("path", "/other"))     // the bare key, by the DAY
	})
	t.Run("Nested", func(t *testing.T) {
		check(t, overGRPC, "OK [OK 1]", desc("tenant", "t1", "route", "/orders"))
		check(t, overGRPC, "OK [OK 6]", desc("tenant", "t1", "route", "/cart"))
		// Greedy, no backtracking: tenant=acme's children have no
		// route=/orders, and the bare tenant's are not tried.
		check(t, overGRPC, "OK [OK 0]", desc("tenant", "acme", "route", "/orders"))
		check(t, overGRPC, "OK [OK 9]", desc("tenant", "acme"))
		check(t, overGRPC, "OK [OK 0]", desc("tenant", "t1"))                                 // a node without rate_limit
		check(t, overGRPC, "OK [OK 0]", desc("tenant", "t1", "route", "/cart", "extra", "1")) // deeper than the rules
		check(t, overGRPC, "OK [OK 0]", desc("nolimit", "x"))
		check(t, overGRPC, "OK [OK 2]", desc("user", "")) // an empty value: the bare key
	})
	t.Run("Unlimited", func(t *testing.T) {
		check(t, overGRPC, "OK [OK 4294967295]", desc("internal", "x"))
		check(t, overJSON, "OK [OK 4294967295]", desc("internal", "x"))
	})
	t.Run("RequestsPerUnitZero", func(t *testing.T) {
		check(t, overGRPC, "OK [OK 0]", withHits(desc("blocked", "z"), 0)) // a check of a counter at 0
		check(t, overGRPC, "OVER_LIMIT [OVER_LIMIT 0]", desc("blocked", "x"))
	})
	t.Run("Replaces", func(t *testing.T) {
		check(t, overGRPC, "OK [OK 99]", desc("plan", "gold"))
		check(t, overGRPC, "OK [OK 0, OK 1]", desc("plan", "gold"), desc("org", "o1"))
		check(t, overGRPC, "OK [OK 98]", desc("plan", "gold"))
	})
	t.Run("ShadowMode", func(t *testing.T) {
		check(t, overGRPC, "OK [OK 0]", desc("shadow", "x"))
		check(t, overGRPC, "OK [OK 0]", desc("shadow", "x"))
		p.metricsAre(t, series{
			`ratelimit_service_rate_limit_total_hits{domain="diff",key1="shadow"}`:   2,
			`ratelimit_service_rate_limit_within_limit{domain="diff",key1="shadow"}`: 1,
			`ratelimit_service_rate_limit_near_limit{domain="diff",key1="shadow"}`:   1,
			`ratelimit_service_rate_limit_over_limit{domain="diff",key1="shadow"}`:   1,
			`ratelimit_service_rate_limit_shadow_mode{domain="diff",key1="shadow"}`:  1,
		}, `ratelimit_service_rate_limit_total_hits{domain="diff",key1="shadow"`,
			`ratelimit_service_rate_limit_within_limit{domain="diff",key1="shadow"`,
			`ratelimit_service_rate_limit_near_limit{domain="diff",key1="shadow"`,
			`ratelimit_service_rate_limit_over_limit{domain="diff",key1="shadow"`,
			`ratelimit_service_rate_limit_shadow_mode{domain="diff",key1="shadow"`)
	})
	t.Run("DetailedMetric", func(t *testing.T) {
		check(t, overGRPC, "OK [OK 1]", desc("detailed", "a"))
		check(t, overGRPC, "OK [OK 1]", desc("detailed", "b"))
		check(t, overGRPC, "OK [OK 1]", desc("detailed", "a:b|c"))    // ':' and '|' become '_' in a stat name
		check(t, overGRPC, "OK [OK 1]", desc("detailed", "10.0.0.1")) // so do an IPv4 address's dots
		check(t, overGRPC, "OK [OK 1]", desc("detailed", "x.y"))      // other dots split the stat name
		p.metricsAre(t, series{
			`ratelimit_service_rate_limit_total_hits{domain="diff",key1="detailed_a"}`:            1,
			`ratelimit_service_rate_limit_within_limit{domain="diff",key1="detailed_a"}`:          1,
			`ratelimit_service_rate_limit_total_hits{domain="diff",key1="detailed_b"}`:            1,
			`ratelimit_service_rate_limit_within_limit{domain="diff",key1="detailed_b"}`:          1,
			`ratelimit_service_rate_limit_total_hits{domain="diff",key1="detailed_a_b_c"}`:        1,
			`ratelimit_service_rate_limit_within_limit{domain="diff",key1="detailed_a_b_c"}`:      1,
			`ratelimit_service_rate_limit_total_hits{domain="diff",key1="detailed_10_0_0_1"}`:     1,
			`ratelimit_service_rate_limit_within_limit{domain="diff",key1="detailed_10_0_0_1"}`:   1,
			`ratelimit_service_rate_limit_total_hits{domain="diff",key1="detailed_x",key2="y"}`:   1,
			`ratelimit_service_rate_limit_within_limit{domain="diff",key1="detailed_x",key2="y"}`: 1,
		}, `ratelimit_service_rate_limit_total_hits{domain="diff",key1="detailed`,
			`ratelimit_service_rate_limit_within_limit{domain="diff",key1="detailed`)
	})
	t.Run("ShareThreshold", func(t *testing.T) {
		check(t, overGRPC, "OK [OK 2]", desc("files", "docs/a"))
		check(t, overGRPC, "OK [OK 1]", desc("files", "docs/b")) // one counter for the wildcard
		p.metricsAre(t, series{
			`ratelimit_service_rate_limit_total_hits{domain="diff",key1="files_docs/*"}`:   2,
			`ratelimit_service_rate_limit_within_limit{domain="diff",key1="files_docs/*"}`: 2,
		}, `ratelimit_service_rate_limit_total_hits{domain="diff",key1="files`,
			`ratelimit_service_rate_limit_within_limit{domain="diff",key1="files`,
			`ratelimit_service_rate_limit_near_limit{domain="diff",key1="files`)
	})
	t.Run("RulesOfOneStatKey", func(t *testing.T) {
		// Both rules' stat key is diff.dotted.key; each keeps its limit.
		check(t, overGRPC, "OK [OK 9]", desc("dotted.key", "x"))
		check(t, overGRPC, "OK [OK 8]", desc("dotted.key", "x"))
		check(t, overGRPC, "OK [OK 7]", desc("dotted.key", "x"))
		check(t, overGRPC, "OK [OK 1]", desc("dotted", "v", "key", "x"))
		check(t, overGRPC, "OK [OK 0]", desc("dotted", "v", "key", "x"))
	})
	t.Run("ValueToMetric", func(t *testing.T) {
		check(t, overGRPC, "OK [OK 4]", desc("svc", "checkout", "op", "pay"))
		p.metricsAre(t, series{
			`ratelimit_service_rate_limit_total_hits{domain="diff",key1="svc_checkout",key2="op"}`:   1,
			`ratelimit_service_rate_limit_within_limit{domain="diff",key1="svc_checkout",key2="op"}`: 1,
		}, `ratelimit_service_rate_limit_total_hits{domain="diff",key1="svc`,
			`ratelimit_service_rate_limit_within_limit{domain="diff",key1="svc`)
	})
	t.Run("QuotaMode", func(t *testing.T) {
		check(t, overGRPC, "OK [OK 0]", desc("quota", "x"))
		check(t, overGRPC, "OK [OK 0]", desc("quota", "x")) // over its quota: OK, with no reset
	})
	t.Run("HitsAddend", func(t *testing.T) {
		check(t, overGRPC, "OK [OK 3]", hitsAddend(2), desc("hits", "a"))               // the request's
		check(t, overGRPC, "OK [OK 2]", hitsAddend(0), desc("hits", "a"))               // the request's 0 counts 1
		check(t, overGRPC, "OK [OK 2]", withHits(desc("hits", "a"), 0))                 // the descriptor's 0 only checks
		check(t, overJSON, "OK [OK 2]", withHits(desc("hits", "a"), 0))                 // likewise as JSON
		check(t, overGRPC, "OK [OK 0]", hitsAddend(9), withHits(desc("hits", "a"), 2))  // the descriptor's before the request's
		check(t, overGRPC, "OVER_LIMIT [OVER_LIMIT 0]", withHits(desc("hits", "b"), 6)) // above the limit: a denial, no error
		check(t, overGRPC, "OVER_LIMIT [OVER_LIMIT 0]", hitsAddend(6), desc("hits", "c"))
	})
	t.Run("LimitOverride", func(t *testing.T) {
		check(t, overGRPC, "OK [OK 4]", withLimit(desc("user", "ovr"), 5, typev3.RateLimitUnit_HOUR))
		// A changed override keeps the counter.
		check(t, overGRPC, "OK [OK 6]", withLimit(desc("user", "ovr"), 8, typev3.RateLimitUnit_HOUR))
		// A descriptor no rule matches, in a known domain.
		check(t, overJSON, "OK [OK 2]", withLimit(desc("nowhere", "x"), 3, typev3.RateLimitUnit_DAY))
		// Above 1,000,000 a second (Sluice counts it at that ceiling),
		// beside a descriptor over its limit: the request is denied.
		huge := withHits(withLimit(desc("user", "huge"), 4_000_000_000, typev3.RateLimitUnit_HOUR), 5)
		check(t, overGRPC, "OK [OK 3999999995]", huge)
		check(t, overGRPC, "OVER_LIMIT [OK 3999999990, OVER_LIMIT 0]", huge, withHits(desc("hits", "huge"), 6))
	})
	t.Run("CheckAboveALoweredLimit", func(t *testing.T) {
		check(t, overGRPC, "OK [OK 2]", desc("user", "ck"))
		check(t, overGRPC, "OK [OK 1]", desc("user", "ck"))
		check(t, overGRPC, "OVER_LIMIT [OVER_LIMIT 0]", withHits(withLimit(desc("user", "ck"), 1, typev3.RateLimitUnit_HOUR), 0))
	})
	t.Run("OverrideOfAnotherUnit", func(t *testing.T) { // YEAR: its window starts at an hour's start for one hour a year
		check(t, overGRPC, "OK [OK 2]", desc("user", "ou"))
		check(t, overGRPC, "OK [OK 4]", withLimit(desc("user", "ou"), 5, typev3.RateLimitUnit_YEAR))
		check(t, overGRPC, "OK [OK 1]", desc("user", "ou"))
	})
	t.Run("UnknownDomain", func(t *testing.T) {
		requireCodes(t, p.same(t, overGRPC, buildRequest("nope", desc("user", "a"))), "OK [OK 0]")
		requireCodes(t, p.same(t, overJSON, buildRequest("nope", desc("user", "a"), desc("b", "c"))), "OK [OK 0, OK 0]")
		requireCodes(t, p.same(t, overGRPC, buildRequest("nope", withLimit(desc("user", "a"), 1, typev3.RateLimitUnit_HOUR))), "OK [OK 0]")
	})
	t.Run("SeveralDescriptors", func(t *testing.T) {
		check(t, overGRPC, "OVER_LIMIT [OK 2, OVER_LIMIT 0, OK 4294967295]", desc("user", "b"), desc("blocked", "y"), desc("internal", "y"))
		check(t, overGRPC, "OK [OK 1]", desc("user", "b")) // admitted above, so charged, though the request was over
		r := p.same(t, overJSON, buildRequest("diff", desc("user", "c"), desc("blocked", "y")))
		requireCodes(t, r, "OVER_LIMIT [OK 2, OVER_LIMIT 0]")
		if r.code != http.StatusTooManyRequests {
			t.Fatalf("POST /json over the limit answered %d, want 429", r.code)
		}
	})
	t.Run("BadRequests", func(t *testing.T) {
		requireCodes(t, p.same(t, overGRPC, buildRequest("")), "code 2: rate limit domain must not be empty")
		requireCodes(t, p.same(t, overGRPC, buildRequest("diff")), "code 2: rate limit descriptor list must not be empty")
		for _, body := range []string{`{`, `{"domain": "diff", "descriptors": 3}`, `{"domain": ""}`} {
			theirs := p.theirs.postJSON(t, body)
			if theirs.code != http.StatusBadRequest {
				t.Fatalf("theirs answered POST /json %s with %d, the case expects 400", body, theirs.code)
			}
			requireSameReply(t, "POST /json "+body, theirs, p.ours.postJSON(t, body))
		}
	})
	t.Run("Health", func(t *testing.T) {
		theirCode, theirBody, err := p.theirs.get("/healthcheck")
		if err != nil {
			t.Fatal(err)
		}
		ourCode, ourBody, err := p.ours.get("/healthcheck")
		if err != nil {
			t.Fatal(err)
		}
		if theirCode != http.StatusOK || ourCode != theirCode || ourBody != theirBody {
			t.Fatalf("GET /healthcheck: theirs %d %q, ours %d %q", theirCode, theirBody, ourCode, ourBody)
		}
		for _, name := range []string{"", "ratelimit"} {
			for _, s := range p.both() {
				resp, err := s.health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: name})
				if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
					t.Fatalf("%s: grpc.health.v1 Check(%q): %v %v", s.name, name, resp, err)
				}
			}
		}
	})
	t.Run("RLConfig", func(t *testing.T) {
		// The debug listener's dump of the configuration: the same lines
		// (theirs walks maps, so in no fixed order).
		dump := func(s *service) []string {
			code, body, err := httpDo(http.MethodGet, "http://"+s.debugAddr+"/rlconfig", "")
			if err != nil || code != http.StatusOK {
				t.Fatalf("%s: GET /rlconfig: %d %v", s.name, code, err)
			}
			lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
			sort.Strings(lines)
			return lines
		}
		theirs, ours := dump(p.theirs), dump(p.ours)
		if strings.Join(theirs, "\n") != strings.Join(ours, "\n") {
			t.Fatalf("GET /rlconfig differs:\ntheirs:\n%s\nours:\n%s", strings.Join(theirs, "\n"), strings.Join(ours, "\n"))
		}
		if len(theirs) < 20 {
			t.Fatalf("GET /rlconfig: %d lines for mainConfig's rules:\n%s", len(theirs), strings.Join(theirs, "\n"))
		}
	})
	t.Run("Metrics", func(t *testing.T) {
		p.sameMetrics(t, decisionMetrics("diff")...)
		p.sameMetrics(t, `ratelimit_service_rate_limit_nope_domain_not_found`, `ratelimit_service_config_load`,
			`ratelimit_service_should_rate_limit_error`, `ratelimit_service_global_shadow_mode`)
		// The gRPC calls (POST /json is not one), as their interceptor
		// counts them.
		p.sameMetrics(t, `ratelimit_service_total_requests{grpc_method="ShouldRateLimit"}`,
			`ratelimit_service_response_time_seconds_count{grpc_method="ShouldRateLimit"}`)
	})
}
