package envoyratelimit

import (
	"context"
	"math"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
)

// TestFixedWindowAnswers: ten of 10 per MINUTE allowed with what remains,
// the eleventh OVER_LIMIT, all until the epoch-aligned minute ends, then
// the next minute allows again; current_limit is the rule as configured.
func TestFixedWindowAnswers(t *testing.T) {
	f := newFixture(t, Options{})
	for i := range 10 {
		resp := f.call(t, req("api", d("per_min", "x")))
		if resp.GetOverallCode() != ok {
			t.Fatalf("request %d: %s", i+1, resp.GetOverallCode())
		}
		checkStatus(t, "allowed", resp.GetStatuses()[0], dstatus{ok, 10, minute, uint32(9 - i), 50})
	}
	resp := f.call(t, req("api", d("per_min", "x")))
	if resp.GetOverallCode() != over {
		t.Fatalf("eleventh: %s", resp.GetOverallCode())
	}
	checkStatus(t, "eleventh", resp.GetStatuses()[0], dstatus{over, 10, minute, 0, 50})
	checkStatus(t, "another value", f.call(t, req("api", d("per_min", "y"))).GetStatuses()[0], dstatus{ok, 10, minute, 9, 50})

	f.clock.Advance(49*time.Second + 500*time.Millisecond)
	checkStatus(t, "half a second before the window ends", f.call(t, req("api", d("per_min", "x"))).GetStatuses()[0],
		dstatus{over, 10, minute, 0, 1})
	f.clock.Advance(500 * time.Millisecond)
	checkStatus(t, "next minute", f.call(t, req("api", d("per_min", "x"))).GetStatuses()[0], dstatus{ok, 10, minute, 9, 60})
}

// TestHitsAddend: the request's hits_addend (0 counts 1) and each
// descriptor's own (0 only checks); more than the limit at once is
// OVER_LIMIT, never an error, and charges nothing.
func TestHitsAddend(t *testing.T) {
	f := newFixture(t, Options{})
	r := req("api", d("per_min", "x"))
	r.HitsAddend = 0
	checkStatus(t, "request hits_addend 0", f.call(t, r).GetStatuses()[0], dstatus{ok, 10, minute, 9, 50})
	r.HitsAddend = 3
	checkStatus(t, "request hits_addend 3", f.call(t, r).GetStatuses()[0], dstatus{ok, 10, minute, 6, 50})
	r = req("api", hits(d("per_min", "x"), 2))
	r.HitsAddend = 5
	checkStatus(t, "the descriptor's own wins", f.call(t, r).GetStatuses()[0], dstatus{ok, 10, minute, 4, 50})
	checkStatus(t, "descriptor hits_addend 0 checks", f.call(t, req("api", hits(d("per_min", "x"), 0))).GetStatuses()[0],
		dstatus{ok, 10, minute, 4, 50})

	resp := f.call(t, req("api", hits(d("per_min", "x"), 11)))
	if resp.GetOverallCode() != over {
		t.Fatalf("11 hits of a limit of 10: %s", resp.GetOverallCode())
	}
	checkStatus(t, "above the limit", resp.GetStatuses()[0], dstatus{over, 10, minute, 0, 50})
	checkStatus(t, "above the limit charged nothing", f.call(t, req("api", hits(d("per_min", "x"), 4))).GetStatuses()[0],
		dstatus{ok, 10, minute, 0, 50})
	checkStatus(t, "a check at the limit is OK", f.call(t, req("api", hits(d("per_min", "x"), 0))).GetStatuses()[0],
		dstatus{ok, 10, minute, 0, 50})
	checkStatus(t, "then one more is over", f.call(t, req("api", d("per_min", "x"))).GetStatuses()[0],
		dstatus{over, 10, minute, 0, 50})
}

// TestZeroUnlimitedAndNoLimit: requests_per_unit 0 denies every hit (a
// check is OK with nothing remaining), unlimited answers OK with
// MaxUint32 remaining and no current_limit, and a level without
// rate_limit answers a bare OK; neither of the last two touches the store.
func TestZeroUnlimitedAndNoLimit(t *testing.T) {
	f := newFixture(t, Options{})
	resp := f.call(t, req("api", d("zero", "x"), hits(d("zero", "y"), 0), d("free", "x"), d("open", "x"), d("nothing", "x")))
	if resp.GetOverallCode() != over {
		t.Fatalf("overall %s", resp.GetOverallCode())
	}
	checkStatus(t, "zero", resp.GetStatuses()[0], dstatus{over, 0, second, 0, 1})
	checkStatus(t, "zero, checked", resp.GetStatuses()[1], dstatus{ok, 0, second, 0, 1})
	checkStatus(t, "unlimited", resp.GetStatuses()[2], dstatus{ok, 0, 0, math.MaxUint32, -1})
	checkStatus(t, "no rate_limit", resp.GetStatuses()[3], dstatus{ok, 0, 0, 0, -1})
	checkStatus(t, "no rule", resp.GetStatuses()[4], dstatus{ok, 0, 0, 0, -1})
	if n := f.store.Len(); n != 0 {
		t.Fatalf("%d keys in the store, want none", n)
	}
}

// TestReplaces: a rule named in another matched rule's replaces is not
// applied in that request (nor counted), and is on its own.
func TestReplaces(t *testing.T) {
	f := newFixture(t, Options{})
	for range 3 {
		resp := f.call(t, req("api", d("old", "x"), d("new", "x")))
		checkStatus(t, "replaced", resp.GetStatuses()[0], dstatus{ok, 0, 0, 0, -1})
		if resp.GetOverallCode() != ok {
			t.Fatalf("overall %s", resp.GetOverallCode())
		}
	}
	checkStatus(t, "alone", f.call(t, req("api", d("old", "x"))).GetStatuses()[0], dstatus{ok, 1, minute, 0, 50})
	checkStatus(t, "alone again", f.call(t, req("api", d("old", "x"))).GetStatuses()[0], dstatus{over, 1, minute, 0, 50})
	checkStatus(t, "the replacing rule", f.call(t, req("api", d("new", "x"))).GetStatuses()[0], dstatus{ok, 100, hour, 96, 3590})
}

// TestShadowAndQuotaMode: a rule in shadow_mode answers OK where it
// would deny; SHADOW_MODE makes the overall code OK and leaves the
// statuses; quota_mode answers the descriptor OK without its reset.
func TestShadowAndQuotaMode(t *testing.T) {
	f := newFixture(t, Options{})
	for range 2 {
		f.call(t, req("api", d("shadow", "x")))
	}
	resp := f.call(t, req("api", d("shadow", "x")))
	if resp.GetOverallCode() != ok {
		t.Fatalf("shadow_mode: overall %s", resp.GetOverallCode())
	}
	checkStatus(t, "shadow_mode", resp.GetStatuses()[0], dstatus{ok, 2, minute, 0, 50})
	if v := f.metric(t, "ratelimit_service_rate_limit_shadow_mode", map[string]string{"domain": "api", "key1": "shadow"}); v != 1 {
		t.Fatalf("shadow_mode counted %v, want 1", v)
	}

	f.call(t, req("api", d("quota", "x")))
	resp = f.call(t, req("api", d("quota", "x")))
	if resp.GetOverallCode() != ok {
		t.Fatalf("quota_mode: overall %s", resp.GetOverallCode())
	}
	checkStatus(t, "quota_mode", resp.GetStatuses()[0], dstatus{ok, 1, minute, 0, -1})

	g := newFixture(t, Options{ShadowMode: true})
	g.call(t, req("api", d("old", "x")))
	resp = g.call(t, req("api", d("old", "x"), d("per_min", "x")))
	if resp.GetOverallCode() != ok {
		t.Fatalf("global shadow mode: overall %s", resp.GetOverallCode())
	}
	checkStatus(t, "global shadow mode", resp.GetStatuses()[0], dstatus{over, 1, minute, 0, 50})
	if v := g.metric(t, "ratelimit_service_global_shadow_mode", map[string]string{}); v != 1 {
		t.Fatalf("global_shadow_mode %v, want 1", v)
	}
}

// TestUnknownDomainAndBadRequests: an unknown domain answers OK for every
// descriptor (counted as domain_not_found); an empty domain or no
// descriptor is an error, as theirs.
func TestUnknownDomainAndBadRequests(t *testing.T) {
	f := newFixture(t, Options{})
	resp := f.call(t, req("nowhere", d("per_min", "x"), d("a", "b")))
	if resp.GetOverallCode() != ok {
		t.Fatalf("unknown domain: %s", resp.GetOverallCode())
	}
	for i, s := range resp.GetStatuses() {
		checkStatus(t, "unknown domain", s, dstatus{ok, 0, 0, 0, -1})
		_ = i
	}
	if v := f.metric(t, "ratelimit_service_rate_limit_nowhere_domain_not_found", map[string]string{}); v != 2 {
		t.Fatalf("domain_not_found %v, want 2", v)
	}
	for _, r := range []*rlsv3.RateLimitRequest{req("", d("per_min", "x")), req("api")} {
		_, err := f.svc.ShouldRateLimit(context.Background(), r)
		if grpcstatus.Code(err) != codes.Unknown {
			t.Fatalf("%v: error %v, want gRPC Unknown", r, err)
		}
	}
	if v := f.metric(t, "ratelimit_service_should_rate_limit_error", map[string]string{"err_type": "service_error"}); v != 2 {
		t.Fatalf("service_error %v, want 2", v)
	}
}

// TestOverride: a descriptor's own limit is its current_limit, on the
// same counter as the rule's and whatever it says; it limits descriptors
// no rule matches, in a known domain only; an unknown unit is an error.
func TestOverride(t *testing.T) {
	f := newFixture(t, Options{})
	with := func(desc *ratelimitv3.RateLimitDescriptor, n uint32, u typev3.RateLimitUnit) *ratelimitv3.RateLimitDescriptor {
		desc.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: n, Unit: u}
		return desc
	}
	f.call(t, req("api", d("per_min", "x")))
	f.call(t, req("api", d("per_min", "x")))
	checkStatus(t, "override 3", f.call(t, req("api", with(d("per_min", "x"), 3, typev3.RateLimitUnit_MINUTE))).GetStatuses()[0],
		dstatus{ok, 3, minute, 0, 50})
	checkStatus(t, "override 3 again", f.call(t, req("api", with(d("per_min", "x"), 3, typev3.RateLimitUnit_MINUTE))).GetStatuses()[0],
		dstatus{over, 3, minute, 0, 50})
	checkStatus(t, "override 5, same counter", f.call(t, req("api", with(d("per_min", "x"), 5, typev3.RateLimitUnit_MINUTE))).GetStatuses()[0],
		dstatus{ok, 5, minute, 1, 50})
	checkStatus(t, "the rule, same counter", f.call(t, req("api", d("per_min", "x"))).GetStatuses()[0],
		dstatus{ok, 10, minute, 5, 50})
	checkStatus(t, "no rule, overridden", f.call(t, req("api", with(d("anything", "x"), 1, typev3.RateLimitUnit_HOUR))).GetStatuses()[0],
		dstatus{ok, 1, hour, 0, 3590})
	checkStatus(t, "unknown domain, overridden", f.call(t, req("nowhere", with(d("anything", "x"), 1, typev3.RateLimitUnit_HOUR))).GetStatuses()[0],
		dstatus{ok, 0, 0, 0, -1})
	if _, err := f.svc.ShouldRateLimit(context.Background(), req("api", with(d("a", "b"), 1, typev3.RateLimitUnit_UNKNOWN))); grpcstatus.Code(err) != codes.Unknown {
		t.Fatalf("unknown unit: %v", err)
	}

	// A limit of 0 counts nothing, but a check of it sees what an override
	// of the same descriptor counted.
	checkStatus(t, "check of a limit of 0", f.call(t, req("api", hits(d("zero", "z"), 0))).GetStatuses()[0], dstatus{ok, 0, second, 0, 1})
	f.call(t, req("api", with(d("zero", "z"), 5, typev3.RateLimitUnit_SECOND)))
	checkStatus(t, "check of a limit of 0 after an override counted", f.call(t, req("api", hits(d("zero", "z"), 0))).GetStatuses()[0],
		dstatus{over, 0, second, 0, 1})
	checkStatus(t, "check of an override of 0", f.call(t, req("api", hits(with(d("zero", "z"), 0, typev3.RateLimitUnit_SECOND), 0))).GetStatuses()[0],
		dstatus{over, 0, second, 0, 1})
}

// TestCheckAboveALoweredLimit: a check (hits_addend 0) of a fixed window
// whose counter holds more than the limit in force (an override lowered
// it) is over the limit; at the limit itself it is OK with 0 remaining,
// as envoyproxy/ratelimit answers (found by serve/envoydiff).
func TestCheckAboveALoweredLimit(t *testing.T) {
	f := newFixture(t, Options{})
	with := func(desc *ratelimitv3.RateLimitDescriptor, n uint32) *ratelimitv3.RateLimitDescriptor {
		desc.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: n, Unit: typev3.RateLimitUnit_MINUTE}
		return desc
	}
	f.call(t, req("api", d("per_min", "ck")))
	f.call(t, req("api", d("per_min", "ck")))
	checkStatus(t, "check under 1 with 2 counted", f.call(t, req("api", hits(with(d("per_min", "ck"), 1), 0))).GetStatuses()[0],
		dstatus{over, 1, minute, 0, 50})
	checkStatus(t, "check under 2 with 2 counted", f.call(t, req("api", hits(with(d("per_min", "ck"), 2), 0))).GetStatuses()[0],
		dstatus{ok, 2, minute, 0, 50})
	checkStatus(t, "check under the rule's 10", f.call(t, req("api", hits(d("per_min", "ck"), 0))).GetStatuses()[0],
		dstatus{ok, 10, minute, 8, 50})
}

// TestOverrideOfAnotherUnit: an override in another unit than the rule's
// counts in a counter of its own, as envoyproxy/ratelimit's keys hold the
// unit's window; an override of the same unit shares the rule's.
func TestOverrideOfAnotherUnit(t *testing.T) {
	f := newFixture(t, Options{})
	with := func(desc *ratelimitv3.RateLimitDescriptor, n uint32, u typev3.RateLimitUnit) *ratelimitv3.RateLimitDescriptor {
		desc.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: n, Unit: u}
		return desc
	}
	checkStatus(t, "the rule", f.call(t, req("api", d("per_min", "ou"))).GetStatuses()[0], dstatus{ok, 10, minute, 9, 50})
	checkStatus(t, "an override by the hour", f.call(t, req("api", with(d("per_min", "ou"), 5, typev3.RateLimitUnit_HOUR))).GetStatuses()[0],
		dstatus{ok, 5, hour, 4, 3590})
	checkStatus(t, "the rule again", f.call(t, req("api", d("per_min", "ou"))).GetStatuses()[0], dstatus{ok, 10, minute, 8, 50})
	checkStatus(t, "an override by the minute", f.call(t, req("api", with(d("per_min", "ou"), 5, typev3.RateLimitUnit_MINUTE))).GetStatuses()[0],
		dstatus{ok, 5, minute, 2, 50})
}

// TestResponseHeaders: the limit, remaining and reset of the descriptor
// with the least remaining, or of the last one over its limit; named as
// configured; none when disabled.
func TestResponseHeaders(t *testing.T) {
	headers := func(resp *rlsv3.RateLimitResponse) map[string]string {
		out := map[string]string{}
		for _, h := range resp.GetResponseHeadersToAdd() {
			out[h.GetKey()] = h.GetValue()
		}
		return out
	}
	f := newFixture(t, Options{ResponseHeaders: true})
	got := headers(f.call(t, req("api", d("per_min", "x"), d("hourly", "x"), d("free", "x"))))
	want := map[string]string{"RateLimit-Limit": "5", "RateLimit-Remaining": "4", "RateLimit-Reset": "3590"}
	if len(got) != 3 || got["RateLimit-Limit"] != want["RateLimit-Limit"] || got["RateLimit-Remaining"] != want["RateLimit-Remaining"] || got["RateLimit-Reset"] != want["RateLimit-Reset"] {
		t.Fatalf("headers %v, want %v", got, want)
	}
	f.call(t, req("api", d("old", "x")))
	got = headers(f.call(t, req("api", d("hourly", "x"), d("old", "x"), d("per_min", "x"))))
	if got["RateLimit-Limit"] != "1" || got["RateLimit-Remaining"] != "0" || got["RateLimit-Reset"] != "50" {
		t.Fatalf("over the limit: headers %v, want the denied descriptor's", got)
	}
	if got := headers(f.call(t, req("api", d("open", "x")))); len(got) != 0 {
		t.Fatalf("no limit: headers %v", got)
	}

	g := newFixture(t, Options{ResponseHeaders: true, LimitHeader: "X-L", RemainingHeader: "X-R", ResetHeader: "X-T"})
	if got := headers(g.call(t, req("api", d("per_min", "x")))); got["X-L"] != "10" || got["X-R"] != "9" || got["X-T"] != "50" {
		t.Fatalf("named headers: %v", got)
	}
	h := newFixture(t, Options{})
	if got := headers(h.call(t, req("api", d("per_min", "x")))); len(got) != 0 {
		t.Fatalf("disabled: headers %v", got)
	}
}
