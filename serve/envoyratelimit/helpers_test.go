package envoyratelimit

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/serve/envoyratelimit/config"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memstore"
)

// start is aligned to every unit's window up to a day: 2026-01-01 00:00 UTC.
var start = time.Unix(1767225600, 0)

type fixture struct {
	svc   *Service
	clock *sluicetest.FakeClock
	store *memstore.Store
	reg   *prometheus.Registry
}

func apiFiles(t *testing.T) []config.File {
	t.Helper()
	data, err := os.ReadFile("testdata/api.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return []config.File{{Path: "testdata/api.yaml", Data: data}}
}

// newFixture serves testdata/api.yaml on a memstore whose clock stands 10 s
// into a minute (and an hour, and a day).
func newFixture(t *testing.T, opts Options) *fixture {
	t.Helper()
	clock := sluicetest.NewFakeClock(start.Add(10 * time.Second))
	store, err := memstore.New(memstore.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	opts.Registerer, opts.Clock = reg, clock
	svc, err := New(apiFiles(t), store, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	return &fixture{svc: svc, clock: clock, store: store, reg: reg}
}

// d builds a descriptor of key, value pairs.
func d(kv ...string) *ratelimitv3.RateLimitDescriptor {
	out := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		out.Entries = append(out.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

// hits sets a descriptor's own hits_addend.
func hits(desc *ratelimitv3.RateLimitDescriptor, n uint64) *ratelimitv3.RateLimitDescriptor {
	desc.HitsAddend = wrapperspb.UInt64(n)
	return desc
}

func req(domain string, descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: descs}
}

func (f *fixture) call(t *testing.T, r *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := f.svc.ShouldRateLimit(context.Background(), r)
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	if len(resp.GetStatuses()) != len(r.GetDescriptors()) {
		t.Fatalf("%d statuses for %d descriptors", len(resp.GetStatuses()), len(r.GetDescriptors()))
	}
	return resp
}

// status is the part of a descriptor status the tables compare.
type dstatus struct {
	code      rlsv3.RateLimitResponse_Code
	perUnit   uint32 // current_limit; 0 with unit UNKNOWN: none
	unit      rlsv3.RateLimitResponse_RateLimit_Unit
	remaining uint32
	reset     int64 // duration_until_reset, seconds; -1: none
}

func statusOf(s *rlsv3.RateLimitResponse_DescriptorStatus) dstatus {
	got := dstatus{code: s.GetCode(), perUnit: s.GetCurrentLimit().GetRequestsPerUnit(), unit: s.GetCurrentLimit().GetUnit(),
		remaining: s.GetLimitRemaining(), reset: -1}
	if s.GetDurationUntilReset() != nil {
		got.reset = s.GetDurationUntilReset().GetSeconds()
	}
	return got
}

func checkStatus(t *testing.T, what string, s *rlsv3.RateLimitResponse_DescriptorStatus, want dstatus) {
	t.Helper()
	if got := statusOf(s); got != want {
		t.Fatalf("%s: status %+v, want %+v", what, got, want)
	}
}

const (
	ok     = rlsv3.RateLimitResponse_OK
	over   = rlsv3.RateLimitResponse_OVER_LIMIT
	second = rlsv3.RateLimitResponse_RateLimit_SECOND
	minute = rlsv3.RateLimitResponse_RateLimit_MINUTE
	hour   = rlsv3.RateLimitResponse_RateLimit_HOUR
)

// metric returns the value of the counter (or a histogram's count) name
// with exactly labels, 0 when there is none.
func (f *fixture) metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := f.reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
		for _, m := range fam.GetMetric() {
			if sameLabels(m.GetLabel(), labels) {
				if h := m.GetHistogram(); h != nil {
					return float64(h.GetSampleCount())
				}
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func sameLabels(pairs []*dto.LabelPair, want map[string]string) bool {
	if len(pairs) != len(want) {
		return false
	}
	for _, p := range pairs {
		if v, ok := want[p.GetName()]; !ok || v != p.GetValue() {
			return false
		}
	}
	return true
}

// failingStore fails every call while fail is set.
type failingStore struct {
	sluice.Store
	fail atomic.Bool
}

var errDown = errors.New("connection refused")

func (s *failingStore) Run(ctx context.Context, script *sluice.Script, keys []string, args []int64) ([]int64, error) {
	if s.fail.Load() {
		return nil, errDown
	}
	return s.Store.Run(ctx, script, keys, args)
}
