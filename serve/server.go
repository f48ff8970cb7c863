package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/httplimit"
)

// Server decides for Envoy's rate-limit service (gRPC) and for a small
// JSON API (HTTP), by the policies of one file at a time. It is safe for
// concurrent use; Reload swaps the policies without dropping a call.
type Server struct {
	rlsv3.UnimplementedRateLimitServiceServer

	store  sluice.Store
	meter  metric.MeterProvider
	logger *slog.Logger
	rules  atomic.Pointer[rules]
	probe  sluice.Limiter // peeks at the store for /readyz

	// replaced counts the closes of replaced policies still running, which
	// Close waits for.
	replaced sync.WaitGroup
}

// New builds a server on store from a policy file's contents. mp records
// the decision metrics (nil: none); logger logs reloads and errors.
func New(config []byte, store sluice.Store, mp metric.MeterProvider, logger *slog.Logger) (*Server, error) {
	if store == nil {
		return nil, errors.New("serve: no store")
	}
	if mp == nil {
		mp = noopMeterProvider()
	}
	if logger == nil {
		logger = slog.Default()
	}
	probe, err := tokenbucket.New(store)
	if err != nil {
		return nil, err
	}
	s := &Server{store: store, meter: mp, logger: logger, probe: probe}
	rs, err := s.build(config)
	if err != nil {
		return nil, err
	}
	s.rules.Store(rs)
	return s, nil
}

func (s *Server) build(config []byte) (*rules, error) {
	c, err := ParseConfig(config)
	if err != nil {
		return nil, err
	}
	return buildRules(c, s.store, s.meter)
}

// Reload replaces the policies with those of config. A file that does not
// build is refused, and the policies in force are kept. Calls in flight
// finish on the old policies, whose leases are then closed.
func (s *Server) Reload(config []byte) error {
	rs, err := s.build(config)
	if err != nil {
		return err
	}
	old := s.rules.Swap(rs)
	s.replaced.Go(func() {
		if err := old.Close(); err != nil {
			s.logger.Warn("serve: closing the replaced policies", "err", err)
		}
	})
	return nil
}

// Close waits for the calls in flight and closes the leases, giving their
// unspent tokens back to the store: those of the policies in force, and
// those of policies a reload replaced whose calls are still in flight.
func (s *Server) Close() error {
	err := s.rules.Load().Close()
	s.replaced.Wait()
	return err
}

// acquire returns the policies in force, held until release is called.
func (s *Server) acquire() (rs *rules, release func()) {
	for {
		rs = s.rules.Load()
		rs.mu.RLock()
		if !rs.closed {
			return rs, rs.mu.RUnlock
		}
		rs.mu.RUnlock() // replaced meanwhile: take the new ones
		if s.rules.Load() == rs {
			return nil, func() {}
		}
	}
}

var errClosed = errors.New("serve: the server is shutting down")

// ShouldRateLimit implements Envoy's RateLimitService. Every descriptor is
// checked before any is decided, so that a bad request consumes nothing:
// no descriptors, too many (over 64) or too long (over 16 entries), an
// entry without a key, a hits_addend the policy's limit can never allow.
// A descriptor no policy matches is allowed or denied as the file says.
func (s *Server) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	rs, release := s.acquire()
	defer release()
	if rs == nil {
		return nil, status.Error(codes.Unavailable, errClosed.Error())
	}
	if req.GetDomain() != rs.domain {
		return nil, status.Errorf(codes.InvalidArgument, "domain %q: this server serves %q", req.GetDomain(), rs.domain)
	}
	ds := req.GetDescriptors()
	if len(ds) == 0 {
		return nil, status.Error(codes.InvalidArgument, "no descriptors")
	}
	if len(ds) > maxDescriptors {
		return nil, status.Errorf(codes.InvalidArgument, "%d descriptors: at most %d in one request", len(ds), maxDescriptors)
	}
	type check struct {
		rule    *rule
		target  target
		cost    int64
		entries []entry
	}
	checks := make([]check, len(ds))
	for i, d := range ds {
		if len(d.GetEntries()) == 0 || len(d.GetEntries()) > maxEntries {
			return nil, status.Errorf(codes.InvalidArgument, "descriptor %d: %d entries: give 1 to %d", i, len(d.GetEntries()), maxEntries)
		}
		entries := make([]entry, len(d.GetEntries()))
		for j, e := range d.GetEntries() {
			if e.GetKey() == "" {
				return nil, status.Errorf(codes.InvalidArgument, "descriptor %d, entry %d: no key", i, j)
			}
			entries[j] = entry{e.GetKey(), e.GetValue()}
		}
		r := rs.match(entries)
		if r == nil {
			continue
		}
		hits := uint64(req.GetHitsAddend())
		if d.GetHitsAddend() != nil {
			hits = d.GetHitsAddend().GetValue()
		}
		hits = max(hits, 1)
		if hits > uint64(math.MaxInt64)/uint64(r.cost) {
			return nil, status.Errorf(codes.InvalidArgument, "descriptor %d: hits_addend %d is out of range", i, hits)
		}
		cost := int64(hits) * r.cost
		t := rs.target(r, entries)
		if err := ext.CheckRequest(r.limiter, t.key, t.limit, cost); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "descriptor %d (policy %q): hits_addend %d: %v", i, r.name, hits, err)
		}
		checks[i] = check{r, t, cost, entries}
	}

	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}
	var retryAfter time.Duration
	for i, c := range checks {
		st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
		resp.Statuses = append(resp.Statuses, st)
		if c.rule == nil {
			if rs.deny {
				st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
				resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
			}
			continue
		}
		if c.rule.shadow {
			if err := s.shadow(ctx, c.rule, c.target, c.cost, describeEntries(c.entries), "grpc"); err != nil {
				return nil, status.FromContextError(err).Err()
			}
			continue
		}
		d, err := c.rule.limiter.AllowN(ctx, c.target.key, c.target.limit, c.cost)
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return nil, status.FromContextError(err).Err()
			}
			s.logger.Error("serve: no decision", "policy", c.rule.name, "descriptor", i, "err", err)
			return nil, status.Errorf(codes.Unavailable, "policy %q: no decision: %v", c.rule.name, err)
		}
		st.CurrentLimit = currentLimit(c.rule.name, c.target.limit)
		st.LimitRemaining = uint32(min(d.Remaining, math.MaxUint32))
		st.DurationUntilReset = durationpb.New(d.ResetAfter)
		if !d.Allowed {
			st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
			retryAfter = max(retryAfter, d.RetryAfter)
		}
		policy, rateLimit := httplimit.Fields(c.rule.name, c.rule.algorithm, c.target.limit, d)
		resp.ResponseHeadersToAdd = append(resp.ResponseHeadersToAdd, &corev3.HeaderValue{Key: "RateLimit-Policy", Value: policy})
		if rateLimit != "" {
			resp.ResponseHeadersToAdd = append(resp.ResponseHeadersToAdd, &corev3.HeaderValue{Key: "RateLimit", Value: rateLimit})
		}
	}
	if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT && retryAfter > 0 {
		resp.ResponseHeadersToAdd = append(resp.ResponseHeadersToAdd, &corev3.HeaderValue{
			Key: "Retry-After", Value: strconv.FormatInt(int64(math.Ceil(retryAfter.Seconds())), 10)})
	}
	return resp, nil
}

// currentLimit states a rule's limit (its tier's) as Envoy's RateLimit:
// requests per the unit its period fits (10 per 30 s is 20 per MINUTE).
func currentLimit(name string, limit sluice.Limit) *rlsv3.RateLimitResponse_RateLimit {
	units := []struct {
		d time.Duration
		u rlsv3.RateLimitResponse_RateLimit_Unit
	}{
		{time.Second, rlsv3.RateLimitResponse_RateLimit_SECOND},
		{time.Minute, rlsv3.RateLimitResponse_RateLimit_MINUTE},
		{time.Hour, rlsv3.RateLimitResponse_RateLimit_HOUR},
		{24 * time.Hour, rlsv3.RateLimitResponse_RateLimit_DAY},
	}
	for _, u := range units {
		if u.d%limit.Period == 0 {
			n := limit.Rate * int64(u.d/limit.Period)
			return &rlsv3.RateLimitResponse_RateLimit{Name: name, RequestsPerUnit: uint32(min(n, math.MaxUint32)), Unit: u.u}
		}
	}
	perDay := float64(limit.Rate) * float64(24*time.Hour) / float64(limit.Period)
	return &rlsv3.RateLimitResponse_RateLimit{Name: name, RequestsPerUnit: uint32(min(perDay, math.MaxUint32)),
		Unit: rlsv3.RateLimitResponse_RateLimit_DAY}
}

// AllowRequest is the body of POST /v1/allow.
type AllowRequest struct {
	Policy string `json:"policy"`
	// Key is the caller's id, for a policy of one entry: the descriptor
	// of that entry with this value, which the policy must match.
	Key string `json:"key"`
	// Descriptor, instead of Key, is the descriptor's entries in order,
	// for a policy of several entries; the policy must match it.
	Descriptor []MatchEntry `json:"descriptor"`
	Cost       int64        `json:"cost"`
}

// AllowResponse is its answer.
type AllowResponse struct {
	Allowed      bool   `json:"allowed"`
	Remaining    int64  `json:"remaining"`
	RetryAfterMs int64  `json:"retry_after_ms"`
	ResetAfterMs int64  `json:"reset_after_ms"`
	Source       string `json:"source"`
	// ShadowDenied says that the policy, in shadow mode, would have
	// denied: Allowed is true and RetryAfterMs 0, as the request is let
	// through; Remaining and ResetAfterMs are the store's.
	ShadowDenied bool `json:"shadow_denied,omitempty"`
}

// Handler serves POST /v1/allow, GET /healthz, GET /readyz and, when
// metrics is not nil, GET /metrics.
func (s *Server) Handler(metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/allow", s.allow)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", s.ready)
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func badRequest(w http.ResponseWriter, format string, args ...any) {
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf(format, args...)})
}

func (s *Server) allow(w http.ResponseWriter, r *http.Request) {
	var req AllowRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		badRequest(w, "body: %v", err)
		return
	}
	rs, release := s.acquire()
	defer release()
	if rs == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": errClosed.Error()})
		return
	}
	rule := rs.byName[req.Policy]
	if rule == nil {
		badRequest(w, "policy: unknown %q", req.Policy)
		return
	}
	t, err := rs.targetOfRequest(rule, req)
	if err != nil {
		badRequest(w, "%v", err)
		return
	}
	cost := req.Cost
	if cost == 0 {
		cost = rule.cost
	}
	if err := ext.CheckRequest(rule.limiter, t.key, t.limit, cost); err != nil {
		badRequest(w, "cost: %v", err)
		return
	}
	ctx := r.Context()
	if rule.shadow {
		ctx = ext.WithShadow(ctx)
	}
	d, err := rule.limiter.AllowN(ctx, t.key, t.limit, cost)
	if err != nil {
		s.logger.Error("serve: no decision", "policy", rule.name, "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "no decision: the store is unavailable"})
		return
	}
	if rule.shadow {
		writeJSON(w, http.StatusOK, s.shadowAnswer(rule, t, req, d))
		return
	}
	policy, rateLimit := httplimit.Fields(rule.name, rule.algorithm, t.limit, d)
	w.Header().Set("RateLimit-Policy", policy)
	if rateLimit != "" {
		w.Header().Set("RateLimit", rateLimit)
	}
	writeJSON(w, http.StatusOK, AllowResponse{Allowed: d.Allowed, Remaining: d.Remaining, RetryAfterMs: d.RetryAfter.Milliseconds(),
		ResetAfterMs: d.ResetAfter.Milliseconds(), Source: d.Source.String()})
}

// ready answers 503 when the store does not answer and some policy could
// not decide without it (no fallback, or a Closed one); Open and Local
// policies keep deciding.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 500*time.Millisecond)
	defer cancel()
	_, err := s.probe.AllowN(ctx, "sluice-serve:readyz", sluice.PerSecond(1), 0)
	if err == nil {
		_, _ = w.Write([]byte("ok\n"))
		return
	}
	rs, release := s.acquire()
	defer release()
	if rs != nil {
		var needy []string
		for _, rule := range rs.ordered {
			if rule.fallback == "" || rule.fallback == "closed" {
				needy = append(needy, rule.name)
			}
		}
		if len(needy) == 0 {
			_, _ = fmt.Fprintf(w, "degraded: the store does not answer (%v); every policy has a fallback that decides\n", err)
			return
		}
		http.Error(w, fmt.Sprintf("not ready: the store does not answer (%v), and policies %q cannot decide without it", err, needy), http.StatusServiceUnavailable)
		return
	}
	http.Error(w, errClosed.Error(), http.StatusServiceUnavailable)
}
