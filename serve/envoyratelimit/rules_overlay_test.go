package envoyratelimit

import (
	"context"
	"fmt"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/serve/envoyratelimit/config"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/store/memstore"
)

// fixtureOf serves one YAML file as newFixture serves testdata/api.yaml,
// on a store whose Run calls are counted in runs.
func fixtureOf(t *testing.T, yaml string, opts Options) (*fixture, *countingStore) {
	t.Helper()
	clock := sluicetest.NewFakeClock(start.Add(10 * 1e9))
	store, err := memstore.New(memstore.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	counted := &countingStore{Store: store}
	opts.Clock = clock
	svc, err := New([]config.File{{Path: "t.yaml", Data: []byte(yaml)}}, counted, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	return &fixture{svc: svc, clock: clock, store: store}, counted
}

// countingStore counts the script calls that reach the store, in all and
// by the hash tag of their first key.
type countingStore struct {
	sluice.Store
	runs  atomic.Int64
	mu    sync.Mutex
	byTag map[string]int
}

func (s *countingStore) Run(ctx context.Context, script *sluice.Script, keys []string, args []int64) ([]int64, error) {
	s.runs.Add(1)
	if len(keys) > 0 {
		s.mu.Lock()
		if s.byTag == nil {
			s.byTag = map[string]int{}
		}
		s.byTag[hashTagOf(keys[0])]++
		s.mu.Unlock()
	}
	return s.Store.Run(ctx, script, keys, args)
}

// hashTagOf is the text between a key's first '{' and the '}' after it.
func hashTagOf(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return ""
	}
	end := strings.IndexByte(key[open:], '}')
	if end < 0 {
		return ""
	}
	return key[open+1 : open+end]
}

func (s *countingStore) calls(tag string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byTag[tag]
}

// sharedStatKey has two rules of one stat key, e.a.b: a key with a dot
// beside a nested descriptor.
const sharedStatKey = `
domain: e
descriptors:
  - key: a.b
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: a
    descriptors:
      - key: b
        rate_limit: {unit: minute, requests_per_unit: 2}
`

// TestRulesOfOneStatKeyKeepTheirOwnLimits: two rules whose stat keys are
// the same (a key with a dot beside a nested descriptor) are two limits,
// each enforced as configured, as envoyproxy/ratelimit keeps one limit per
// descriptor; before, the later rule's limiter decided both.
func TestRulesOfOneStatKeyKeepTheirOwnLimits(t *testing.T) {
	f, _ := fixtureOf(t, sharedStatKey, Options{})
	for _, want := range []uint32{9, 8, 7} {
		checkStatus(t, "a.b", f.call(t, req("e", d("a.b", "x"))).GetStatuses()[0], dstatus{ok, 10, minute, want, 50})
	}
	checkStatus(t, "a, b", f.call(t, req("e", d("a", "v", "b", "x"))).GetStatuses()[0], dstatus{ok, 2, minute, 1, 50})
	checkStatus(t, "a, b", f.call(t, req("e", d("a", "v", "b", "x"))).GetStatuses()[0], dstatus{ok, 2, minute, 0, 50})
	checkStatus(t, "a, b", f.call(t, req("e", d("a", "v", "b", "x"))).GetStatuses()[0], dstatus{over, 2, minute, 0, 50})
}

// TestAnOverrideAboveAMillionASecond: a per-request limit above what a
// Sluice fixed window holds (1,000,000 a second) is enforced at that
// ceiling, never a failed call: another descriptor of the request that is
// over its limit still denies it, current_limit and limit_remaining are
// the override's, and more hits at once than the ceiling are over it.
func TestAnOverrideAboveAMillionASecond(t *testing.T) {
	f := newFixture(t, Options{})
	f.call(t, req("api", d("tenant", "t", "route", "r")))
	f.call(t, req("api", d("tenant", "t", "route", "r")))
	f.call(t, req("api", d("tenant", "t", "route", "r")))
	big := d("per_min", "big")
	big.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2_000_000, Unit: typev3.RateLimitUnit_SECOND}
	resp, err := f.svc.ShouldRateLimit(context.Background(), req("api", hits(big, 5), d("tenant", "t", "route", "r")))
	if err != nil {
		t.Fatalf("an override of 2,000,000 a second failed the call: %v", err)
	}
	if resp.GetOverallCode() != over {
		t.Fatalf("overall %v, want OVER_LIMIT from the second descriptor", resp.GetOverallCode())
	}
	checkStatus(t, "the override", resp.GetStatuses()[0], dstatus{ok, 2_000_000, second, 1_999_995, 1})
	// What is counted is held to 1,000,000 a second: a hits_addend above
	// that is over the limit.
	checkStatus(t, "1,500,000 hits at once", f.call(t, req("api", hits(big, 1_500_000))).GetStatuses()[0], dstatus{over, 2_000_000, second, 0, 1})
	big = d("per_min", "big")
	big.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 4_000_000_000, Unit: typev3.RateLimitUnit_MINUTE}
	checkStatus(t, "by the minute", f.call(t, req("api", big)).GetStatuses()[0], dstatus{ok, 4_000_000_000, minute, 3_999_999_999, 50})
}

// TestOverlayHotKeysNameDescriptorValues: an overlay's hot_keys name a
// descriptor's values (several entries' joined by commas), as the native
// format's do: a lease on hot key x takes x's tokens ten at a time, while
// y, not hot, calls the store for every request.
func TestOverlayHotKeysNameDescriptorValues(t *testing.T) {
	f, store := fixtureOf(t, `
domain: e
descriptors:
  - key: user
    rate_limit: {name: per_user, unit: minute, requests_per_unit: 1000}
  - key: tenant
    descriptors:
      - key: route
        rate_limit: {name: per_route, unit: minute, requests_per_unit: 1000}
`, Options{Overlay: map[string]stack.Spec{
		"per_user":  {Algorithm: "tokenbucket", Lease: 10, HotKeys: []string{"x"}},
		"per_route": {Algorithm: "tokenbucket", Lease: 10, HotKeys: []string{"acme,/api"}},
	}})
	for _, c := range []struct {
		desc []string
		tag  string
		hot  bool
	}{
		{[]string{"user", "x"}, `"x"`, true},
		{[]string{"user", "y"}, `"y"`, false},
		{[]string{"tenant", "acme", "route", "/api"}, `"acme","/api"`, true},
		{[]string{"tenant", "acme", "route", "/other"}, `"acme","/other"`, false},
	} {
		for range 12 {
			if code := f.call(t, req("e", d(c.desc...))).GetOverallCode(); code != ok {
				t.Fatalf("%v: %v", c.desc, code)
			}
		}
		n := store.calls(c.tag)
		if c.hot && n > 3 {
			t.Fatalf("hot %v: %d store calls for 12 requests, want a lease's few", c.desc, n)
		}
		if !c.hot && n != 12 {
			t.Fatalf("%v, not hot: %d store calls for 12 requests, want 12", c.desc, n)
		}
	}
}

// TestOverlayWithoutAlgorithmKeepsTheFixedWindow: an overlay entry that
// names no algorithm (only a fallback, say) keeps the rule's fixed window:
// 10 a minute admits 10, not a token bucket's burst and refill.
func TestOverlayWithoutAlgorithmKeepsTheFixedWindow(t *testing.T) {
	f := newFixture(t, Options{Overlay: map[string]stack.Spec{"api.per_min": {Fallback: "open"}}})
	var codes []string
	for range 11 {
		codes = append(codes, f.call(t, req("api", d("per_min", "x"))).GetStatuses()[0].GetCode().String())
	}
	// Half a minute later a token bucket would have refilled 5; the
	// fixed window's minute has not ended.
	f.clock.Advance(30 * 1e9)
	codes = append(codes, f.call(t, req("api", d("per_min", "x"))).GetStatuses()[0].GetCode().String())
	if got := strings.Join(codes, ","); got != strings.Repeat("OK,", 10)+"OVER_LIMIT,OVER_LIMIT" {
		t.Fatalf("got %s", got)
	}
}

// TestOverlayFieldsTakeEffect: each field of an overlay entry is in the
// rule's stack, and what it promises happens: fallback open and closed
// answer while the store fails, shards spread a key over sub-keys, and
// coalesce and deny_cache are layers of the rule's stack.
func TestOverlayFieldsTakeEffect(t *testing.T) {
	const yaml = `
domain: e
descriptors:
  - key: open
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: closed
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: sharded
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: layered
    rate_limit: {unit: minute, requests_per_unit: 100}
`
	clock := sluicetest.NewFakeClock(start.Add(10 * 1e9))
	mem, err := memstore.New(memstore.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	failing := &failingStore{Store: mem}
	counted := &countingStore{Store: failing}
	svc, err := New([]config.File{{Path: "t.yaml", Data: []byte(yaml)}}, counted, Options{Clock: clock, Overlay: map[string]stack.Spec{
		"e.open":    {Fallback: "open"},
		"e.closed":  {Fallback: "closed"},
		"e.sharded": {Algorithm: "tokenbucket", Shards: 4},
		"e.layered": {Algorithm: "gcra", Coalesce: true, DenyCache: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	f := &fixture{svc: svc, clock: clock, store: mem}

	st := svc.acquire()
	layers := map[string]string{}
	for _, r := range st.cfg.Rules() {
		layers[r.Key] = strings.Join(st.stacks[r.Index].Layers(), ",")
	}
	st.mu.RUnlock()
	for key, want := range map[string][]string{
		"e.open": {"fallback", "fixedwindow"}, "e.closed": {"fallback", "fixedwindow"},
		"e.sharded": {"shard", "tokenbucket"}, "e.layered": {"coalesce", "denycache", "gcra"},
	} {
		for _, w := range want {
			if !strings.Contains(layers[key], w) {
				t.Errorf("%s: layers %s, want %s among them", key, layers[key], w)
			}
		}
	}

	for i := range 40 {
		f.call(t, req("e", d("sharded", fmt.Sprint("k", i%2))))
	}
	subkeys := 0
	counted.mu.Lock()
	for tag := range counted.byTag {
		if strings.HasPrefix(tag, `"k0"#`) {
			subkeys++
		}
	}
	counted.mu.Unlock()
	if subkeys < 2 {
		t.Errorf("shards: 4: one key's calls went to %d sub-keys, want several (tags %v)", subkeys, counted.byTag)
	}

	failing.fail.Store(true)
	if c := f.call(t, req("e", d("open", "x"))).GetOverallCode(); c != ok {
		t.Errorf("fallback open with the store down: %v, want OK", c)
	}
	if c := f.call(t, req("e", d("closed", "x"))).GetOverallCode(); c != over {
		t.Errorf("fallback closed with the store down: %v, want OVER_LIMIT", c)
	}
	if _, err := svc.ShouldRateLimit(context.Background(), req("e", d("layered", "x"))); err == nil {
		t.Error("no fallback, the store down: answered, want an error")
	}
}

// TestResponseTimeIsObservedInSeconds: a call that takes 250 ms (on
// synctest's clock) adds 0.25 to ratelimit_service_response_time_seconds,
// the unit its name says (envoyproxy/ratelimit at 3fb702589d36 observes
// milliseconds under that name).
func TestResponseTimeIsObservedInSeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, err := memstore.New()
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		svc, err := New(apiFiles(t), store, Options{Registerer: reg})
		if err != nil {
			t.Fatal(err)
		}
		defer svc.Close()
		info := &grpc.UnaryServerInfo{FullMethod: "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"}
		_, err = svc.UnaryServerInterceptor()(context.Background(), req("api", d("per_min", "x")), info, func(ctx context.Context, r any) (any, error) {
			time.Sleep(250 * time.Millisecond)
			return svc.ShouldRateLimit(ctx, r.(*rlsv3.RateLimitRequest))
		})
		if err != nil {
			t.Fatal(err)
		}
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != "ratelimit_service_response_time_seconds" {
				continue
			}
			if h := f.GetMetric()[0].GetHistogram(); h.GetSampleCount() != 1 || h.GetSampleSum() != 0.25 {
				t.Fatalf("%d samples summing to %v, want one of 0.25", h.GetSampleCount(), h.GetSampleSum())
			}
			return
		}
		t.Fatal("no ratelimit_service_response_time_seconds")
	})
}

// TestAnOverlayOfASharedStatKeyChoosesBothRules: an overlay entry keyed by
// a stat key that two rules share is the stack of both.
func TestAnOverlayOfASharedStatKeyChoosesBothRules(t *testing.T) {
	f, _ := fixtureOf(t, sharedStatKey, Options{Overlay: map[string]stack.Spec{"e.a.b": {Algorithm: "gcra"}}})
	st := f.svc.acquire()
	defer st.mu.RUnlock()
	for _, r := range st.cfg.Rules() {
		if got := st.stacks[r.Index].AlgorithmName(); got != "gcra" {
			t.Errorf("rule %d (%s, %d a minute): %s, want gcra", r.Index, r.Key, r.RequestsPerUnit, got)
		}
	}
}
