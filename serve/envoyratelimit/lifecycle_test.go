package envoyratelimit

import (
	"context"
	"math"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/serve/envoyratelimit/config"
	"github.com/sluicehq/sluice/stack"
	"github.com/sluicehq/sluice/store/memstore"
)

// TestMetrics: the Prometheus names and labels of theirs, counted as they
// count them: near_limit above NEAR_LIMIT_RATIO of the limit, a request
// that crosses the limit split between near_limit and over_limit, stat
// keys of three or more parts labelled domain, key1, key2.
func TestMetrics(t *testing.T) {
	f := newFixture(t, Options{})
	for range 10 {
		f.call(t, req("api", d("per_min", "x")))
	}
	f.call(t, req("api", hits(d("per_min", "x"), 5))) // over: all 5
	f.call(t, req("api", hits(d("per_min", "y"), 7))) // within 7
	f.call(t, req("api", hits(d("per_min", "y"), 5))) // 7 -> 12: 2 over, 2 near (8 to 10)
	f.call(t, req("api", hits(d("per_min", "y"), 2))) // 7 -> 9: 1 near
	f.call(t, req("api", d("tenant", "t", "route", "r")))
	perMin := map[string]string{"domain": "api", "key1": "per_min"}
	for name, want := range map[string]float64{"total_hits": 29, "within_limit": 19, "near_limit": 5, "over_limit": 7, "shadow_mode": 0} {
		if got := f.metric(t, "ratelimit_service_rate_limit_"+name, perMin); got != want {
			t.Errorf("%s %v, want %v", name, got, want)
		}
	}
	deep := map[string]string{"domain": "api", "key1": "tenant", "key2": "route"}
	if got := f.metric(t, "ratelimit_service_rate_limit_total_hits", deep); got != 1 {
		t.Errorf("three-part key: total_hits %v, want 1", got)
	}

	g := newFixture(t, Options{NearLimitRatio: 0.5})
	for range 6 {
		g.call(t, req("api", d("per_min", "x")))
	}
	if got := g.metric(t, "ratelimit_service_rate_limit_near_limit", perMin); got != 1 {
		t.Errorf("NEAR_LIMIT_RATIO 0.5: near_limit %v after 6 of 10, want 1", got)
	}

	intercept := f.svc.UnaryServerInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"}
	if _, err := intercept(context.Background(), req("api", d("per_min", "z")), info, func(ctx context.Context, r any) (any, error) {
		return f.svc.ShouldRateLimit(ctx, r.(*rlsv3.RateLimitRequest))
	}); err != nil {
		t.Fatal(err)
	}
	method := map[string]string{"grpc_method": "ShouldRateLimit"}
	if got := f.metric(t, "ratelimit_service_total_requests", method); got != 1 {
		t.Errorf("total_requests %v, want 1", got)
	}
	if got := f.metric(t, "ratelimit_service_response_time_seconds", method); got != 1 {
		t.Errorf("response_time_seconds observed %v times, want 1", got)
	}
	if got := f.metric(t, "ratelimit_service_config_load_success", map[string]string{}); got != 1 {
		t.Errorf("config_load_success %v, want 1", got)
	}
}

func TestStatNames(t *testing.T) {
	for in, want := range map[string]string{"d.k_10.0.0.1": "d.k_10_0_0_1", "d.a:b|c": "d.a_b_c"} {
		if got := sanitizeStatName(in); got != want {
			t.Errorf("sanitizeStatName(%q) = %q, want %q", in, got, want)
		}
	}
	if got := escapeName("ratelimit_service_rate_limit_my-domain.x_domain_not_found"); got != "ratelimit_service_rate_limit_my_domain_x_domain_not_found" {
		t.Errorf("escapeName: %q", got)
	}
}

// TestStoreError: a store that fails answers gRPC Unknown, as theirs
// answers a Redis error, counted as redis_error.
func TestStoreError(t *testing.T) {
	mem, err := memstore.New()
	if err != nil {
		t.Fatal(err)
	}
	store := &failingStore{Store: mem}
	f := newFixture(t, Options{})
	svc, err := New(apiFiles(t), store, Options{Registerer: f.reg})
	if err == nil {
		defer svc.Close()
		t.Fatal("two services registered on one registry")
	}
	svc, err = New(apiFiles(t), store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	store.fail.Store(true)
	_, err = svc.ShouldRateLimit(context.Background(), req("api", d("per_min", "x")))
	if grpcstatus.Code(err) != codes.Unknown || !strings.Contains(err.Error(), errDown.Error()) {
		t.Fatalf("error %v, want gRPC Unknown saying %q", err, errDown)
	}
	if got := testCounter(svc.metrics.callErrors.WithLabelValues("redis_error")); got != 1 {
		t.Fatalf("redis_error %v, want 1", got)
	}
	store.fail.Store(false)
	if _, err := svc.ShouldRateLimit(context.Background(), req("api", d("per_min", "x"))); err != nil {
		t.Fatalf("after the store came back: %v", err)
	}
}

// TestReload: a bad set keeps the configuration in force and counts
// config_load_error; a good one replaces it.
func TestReload(t *testing.T) {
	f := newFixture(t, Options{})
	f.call(t, req("api", d("per_min", "x")))
	bad := []config.File{{Path: "bad.yaml", Data: []byte("domain: api\ndescriptors:\n  - key: per_min\n    rate_limit: {unit: fortnight}")}}
	if err := f.svc.Reload(bad); err == nil || err.Error() != "bad.yaml: invalid rate limit unit 'fortnight'" {
		t.Fatalf("bad reload: %v", err)
	}
	checkStatus(t, "after a bad reload", f.call(t, req("api", d("per_min", "x"))).GetStatuses()[0], dstatus{ok, 10, minute, 8, 50})
	if got := f.metric(t, "ratelimit_service_config_load_error", map[string]string{}); got != 1 {
		t.Fatalf("config_load_error %v, want 1", got)
	}
	good := []config.File{{Path: "good.yaml", Data: []byte("domain: api\ndescriptors:\n  - key: per_min\n    rate_limit: {unit: minute, requests_per_unit: 3}")}}
	if err := f.svc.Reload(good); err != nil {
		t.Fatal(err)
	}
	checkStatus(t, "after a good reload, on the same counter", f.call(t, req("api", d("per_min", "x"))).GetStatuses()[0], dstatus{ok, 3, minute, 0, 50})
	if got := f.metric(t, "ratelimit_service_config_load_success", map[string]string{}); got != 2 {
		t.Fatalf("config_load_success %v, want 2", got)
	}
	if !f.svc.Loaded() {
		t.Fatal("not Loaded")
	}
	if err := f.svc.Reload(nil); err != nil || f.svc.Loaded() {
		t.Fatalf("no files: %v, Loaded %v: want loaded with no domain", err, f.svc.Loaded())
	}
}

// TestBuildRefuses: a rule Sluice cannot enforce (over one per
// microsecond), an overlay entry that names no rule or an unlimited one,
// and a nil store are refused by New and by Reload, which keeps the
// configuration in force.
func TestBuildRefuses(t *testing.T) {
	store, err := memstore.New()
	if err != nil {
		t.Fatal(err)
	}
	huge := []config.File{{Path: "huge.yaml", Data: []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 2000000}")}}
	for _, tc := range []struct {
		name  string
		files []config.File
		opts  Options
		want  string
	}{
		{"too fast", huge, Options{}, "rule d.k (2000000 per SECOND)"},
		{"overlay of no rule", apiFiles(t), Options{Overlay: map[string]stack.Spec{"nobody": {}}}, `overlay "nobody": no rule`},
		{"overlay of an unlimited rule", apiFiles(t), Options{Overlay: map[string]stack.Spec{"api.free": {}}}, "is unlimited"},
		{"bad overlay", apiFiles(t), Options{Overlay: map[string]stack.Spec{"new": {Algorithm: "nope"}}}, `rule api.new (name "new"), overlay "new"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if svc, err := New(tc.files, store, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
				if svc != nil {
					_ = svc.Close()
				}
				t.Fatalf("error %v, want it to say %q", err, tc.want)
			}
		})
	}
	if _, err := New(apiFiles(t), nil, Options{}); err == nil {
		t.Fatal("nil store accepted")
	}
	for _, ratio := range []float64{-0.1, math.NaN(), math.Inf(1)} {
		if _, err := New(apiFiles(t), store, Options{NearLimitRatio: ratio}); err == nil {
			t.Fatalf("near limit ratio %v accepted", ratio)
		}
	}
	f := newFixture(t, Options{})
	if err := f.svc.Reload(huge); err == nil {
		t.Fatal("reloaded a rule that cannot be enforced")
	}
	checkStatus(t, "after", f.call(t, req("api", d("per_min", "x"))).GetStatuses()[0], dstatus{ok, 10, minute, 9, 50})
}

// TestOverlay: a rule chosen by its stat key or its name is decided by
// the overlay's stack, its rate and period the rule's unless given, while
// current_limit stays as configured.
func TestOverlay(t *testing.T) {
	f := newFixture(t, Options{Overlay: map[string]stack.Spec{
		"api.per_min": {Algorithm: "tokenbucket", Burst: 2},
		"new":         {Algorithm: "slidingcounter"},
	}})
	var codes []string
	for range 3 {
		codes = append(codes, f.call(t, req("api", d("per_min", "x"))).GetStatuses()[0].GetCode().String())
	}
	if strings.Join(codes, ",") != "OK,OK,OVER_LIMIT" {
		t.Fatalf("a token bucket of burst 2: %v", codes)
	}
	// duration_until_reset is the algorithm's: a sliding counter is back to
	// full once the window it counts in has slid out, two periods on.
	checkStatus(t, "sliding counter", f.call(t, req("api", d("new", "x"))).GetStatuses()[0], dstatus{ok, 100, hour, 99, 7190})
}

// blockingStore holds every call until released.
type blockingStore struct {
	sluice.Store
	entered  chan struct{}
	release  chan struct{}
	released atomic.Bool
}

func (s *blockingStore) Run(ctx context.Context, script *sluice.Script, keys []string, args []int64) ([]int64, error) {
	s.entered <- struct{}{}
	<-s.release
	s.released.Store(true)
	return s.Store.Run(ctx, script, keys, args)
}

// TestCloseWaitsForCalls: Close returns only once the calls in flight
// are answered; later calls answer Unavailable, a reload is refused.
func TestCloseWaitsForCalls(t *testing.T) {
	mem, err := memstore.New()
	if err != nil {
		t.Fatal(err)
	}
	store := &blockingStore{Store: mem, entered: make(chan struct{}, 1), release: make(chan struct{})}
	svc, err := New(apiFiles(t), store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	answered := make(chan error, 1)
	go func() {
		_, err := svc.ShouldRateLimit(context.Background(), req("api", d("per_min", "x")))
		answered <- err
	}()
	<-store.entered
	closed := make(chan error, 1)
	go func() { closed <- svc.Close() }()
	for svc.cur.Load() != nil { // Close has taken the configuration away and waits
		runtime.Gosched()
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) with a call in flight", err)
	default:
	}
	close(store.release)
	if err := <-answered; err != nil {
		t.Fatalf("the call in flight: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ShouldRateLimit(context.Background(), req("api", d("per_min", "x"))); grpcstatus.Code(err) != codes.Unavailable {
		t.Fatalf("after Close: %v, want Unavailable", err)
	}
	if err := svc.Reload(apiFiles(t)); err == nil {
		t.Fatal("reloaded after Close")
	}
	if err := svc.Close(); err != nil || svc.Loaded() {
		t.Fatalf("second Close: %v, Loaded %v", err, svc.Loaded())
	}

}

func testCounter(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}
