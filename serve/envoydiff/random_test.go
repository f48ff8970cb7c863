//go:build unix

package envoydiff_test

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

// seedEnv replays TestRandomRequests with a seed it logged.
const seedEnv = "ENVOYDIFF_SEED"

// randomShape is a descriptor of mainConfig's rules (or of none), built
// from a value drawn from a small pool so that counters are hit again and
// reach their limits, and the unit of its rule, the unit of its limit
// override if it has one (see overrideOf).
type randomShape struct {
	entries func(v string) []string
	unit    typev3.RateLimitUnit
}

// randomShapes leaves out the shadow_mode and quota_mode rules: their
// requests over the limit are answered OK, so the test could not tell that
// a counter went over (TestDeliberateDifferences has them).
var randomShapes = []randomShape{
	{func(v string) []string { return []string{"user", v} }, typev3.RateLimitUnit_HOUR},
	{func(string) []string { return []string{"user", "vip"} }, typev3.RateLimitUnit_HOUR},
	{func(v string) []string { return []string{"path", "/api/" + v} }, typev3.RateLimitUnit_HOUR},
	{func(v string) []string { return []string{"path", "/x" + v} }, typev3.RateLimitUnit_DAY},
	{func(string) []string { return []string{"path", "/api/exact"} }, typev3.RateLimitUnit_HOUR},
	{func(v string) []string { return []string{"tenant", v, "route", "/orders"} }, typev3.RateLimitUnit_HOUR},
	{func(v string) []string { return []string{"tenant", "acme", "route", v} }, typev3.RateLimitUnit_HOUR},
	{func(string) []string { return []string{"tenant", "acme"} }, typev3.RateLimitUnit_DAY},
	{func(v string) []string { return []string{"tenant", v} }, typev3.RateLimitUnit_HOUR},
	{func(v string) []string { return []string{"internal", v} }, typev3.RateLimitUnit_HOUR},
	{func(v string) []string { return []string{"blocked", v} }, typev3.RateLimitUnit_HOUR},
	{func(string) []string { return []string{"plan", "gold"} }, typev3.RateLimitUnit_HOUR},
	{func(v string) []string { return []string{"org", v} }, typev3.RateLimitUnit_HOUR},
	{func(v string) []string { return []string{"detailed", v} }, typev3.RateLimitUnit_HOUR},
	{func(v string) []string { return []string{"hits", v} }, typev3.RateLimitUnit_HOUR},
	{func(v string) []string { return []string{"files", "docs/" + v} }, typev3.RateLimitUnit_HOUR},
	{func(v string) []string { return []string{"svc", v, "op", "get"} }, typev3.RateLimitUnit_HOUR},
	{func(v string) []string { return []string{"elsewhere", v} }, typev3.RateLimitUnit_HOUR},
}

// TestRandomRequests sends 400 random requests of mainConfig's domain (and
// of an unknown one) to both, over gRPC and POST /json, with random
// request and descriptor hits_addend and limit overrides, and compares
// every answer, then the metrics. A counter that went over its limit is
// not asked for again (Sluice does not charge a denial:
// TestDeliberateDifferences). The seed is logged; ENVOYDIFF_SEED replays it.
func TestRandomRequests(t *testing.T) {
	awaitWindow(t, 3*time.Minute)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(seedEnv); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", seedEnv, s, err)
		}
	}
	t.Logf("seed %d (%s=%d replays it)", seed, seedEnv, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	p := startPair(t, pairConfig{files: map[string]string{"main.yaml": mainConfig}})
	over := map[string]bool{} // counters, by their entries, that went over
	for step := range 400 {
		req, counters := randomRequest(rng, over)
		v := overGRPC
		if rng.IntN(4) == 0 {
			v = overJSON
		}
		r := p.same(t, v, req)
		for i, st := range r.resp.GetStatuses() {
			if st.GetCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
				over[counters[i]] = true
			}
		}
		if t.Failed() {
			t.Fatalf("at step %d", step)
		}
	}
	t.Logf("%d counters went over their limit", len(over))
	p.sameMetrics(t, decisionMetrics("diff")...)
	p.sameMetrics(t, `ratelimit_service_total_requests{grpc_method="ShouldRateLimit"}`,
		`ratelimit_service_rate_limit_elsewhere_domain_not_found`)
}

// randomRequest returns a request of one to three descriptors whose
// counters are not in over, each descriptor's counter named by its
// entries (and the share_threshold wildcard's, for files).
func randomRequest(rng *rand.Rand, over map[string]bool) (*rlsv3.RateLimitRequest, []string) {
	domain := "diff"
	if rng.IntN(20) == 0 {
		domain = "elsewhere"
	}
	req := &rlsv3.RateLimitRequest{Domain: domain}
	if rng.IntN(3) == 0 {
		req.HitsAddend = uint32(rng.IntN(4))
	}
	var counters []string
	seen := map[string]bool{}
	for range 1 + rng.IntN(3) {
		shape := randomShapes[rng.IntN(len(randomShapes))]
		kv := shape.entries(fmt.Sprintf("v%d", rng.IntN(4)))
		counter := strings.Join(kv, "=")
		if kv[0] == "files" {
			counter = "files=docs/*"
		}
		if over[counter] || seen[counter] {
			continue
		}
		seen[counter] = true
		d := desc(kv...)
		if rng.IntN(4) == 0 {
			withHits(d, uint64(rng.IntN(5)))
		}
		if n := overrideOf(counter); n > 0 {
			withLimit(d, n, shape.unit)
		}
		req.Descriptors = append(req.Descriptors, d)
		counters = append(counters, counter)
	}
	if len(req.Descriptors) == 0 { // every draw was over: a counter never used
		req.Descriptors = []*ratelimitv3.RateLimitDescriptor{desc("user", fmt.Sprintf("fresh%d", rng.Uint64()))}
		counters = []string{"fresh"}
	}
	return req, counters
}

// overrideOf is the limit override (requests_per_unit, 0 for none) every
// request of counter carries: one in four counters has one, the same on
// every request, as Envoy Gateway sends a route's override with each of
// its requests. A counter's limit never changes, so it never holds more
// than its limit unless it went over (and is asked no more).
func overrideOf(counter string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(counter))
	if v := h.Sum32(); v%4 == 0 {
		return 1 + v/4%6
	}
	return 0
}
