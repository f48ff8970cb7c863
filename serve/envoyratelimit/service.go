// Package envoyratelimit is a drop-in for envoyproxy/ratelimit's decision
// service: its configuration (package config), matching, answers and
// Prometheus metrics, with each limit decided by a sluice limiter built by
// package stack (by default the fixed window it counts with, aligned to
// the Unix epoch as its windows are).
//
// Where it differs on purpose: a denied request is never charged (it
// increments every counter first and compares after), the store's clock
// (Redis TIME) places a request in its window, and the Redis keys are
// Sluice's own; docs/serve.md lists every difference.
package envoyratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/serve/envoyratelimit/config"
	"github.com/sluicehq/sluice/stack"
)

// Options configures [New]. The zero value serves as envoyproxy/ratelimit
// does with its defaults.
type Options struct {
	// MergeDomainConfig (MERGE_DOMAIN_CONFIG) merges the descriptors of
	// files that give the same domain, which are refused otherwise.
	MergeDomainConfig bool
	// ShadowMode (SHADOW_MODE) answers OK overall whatever the limits say;
	// the descriptors' statuses still say OVER_LIMIT.
	ShadowMode bool
	// NearLimitRatio (NEAR_LIMIT_RATIO) is the share of a limit above which
	// hits count as near_limit; 0 means 0.8.
	NearLimitRatio float64
	// CacheKeyPrefix (CACHE_KEY_PREFIX) is part of every Redis key.
	CacheKeyPrefix string
	// ResponseHeaders (LIMIT_RESPONSE_HEADERS_ENABLED) adds the limit,
	// remaining and reset headers of the descriptor closest to its limit
	// to every response.
	ResponseHeaders bool
	// LimitHeader, RemainingHeader and ResetHeader name those headers
	// (LIMIT_LIMIT_HEADER, ...); empty: RateLimit-Limit,
	// RateLimit-Remaining, RateLimit-Reset.
	LimitHeader, RemainingHeader, ResetHeader string
	// Registerer receives the metrics, named as envoyproxy/ratelimit's
	// appear with USE_PROMETHEUS=true; nil: none are registered.
	Registerer prometheus.Registerer
	// Logger logs reloads and their errors; nil: nothing is logged.
	Logger *slog.Logger
	// Overlay chooses the stack of a rule, by its name or its configured
	// stat key (config.Rule.Key), while the YAML stays as it is. A Spec's
	// zero Rate and Period are the rule's requests_per_unit and unit. An
	// entry that names no limited rule is refused.
	Overlay map[string]stack.Spec
	// Clock gives the time for duration_until_reset where no store call
	// was made (a limit of 0, a peek at an empty counter) and for the
	// reset header; nil: the system clock.
	Clock sluice.Clock
}

// Service answers envoyproxy/ratelimit's gRPC API
// (envoy.service.ratelimit.v3.RateLimitService). It is safe for concurrent
// use; Reload swaps the configuration without dropping a call.
type Service struct {
	rlsv3.UnimplementedRateLimitServiceServer

	store   sluice.Store
	opts    Options
	logger  *slog.Logger
	metrics *metrics
	clock   sluice.Clock

	cur    atomic.Pointer[state]
	mu     sync.Mutex // serialises Reload and Close
	closed bool
}

var _ rlsv3.RateLimitServiceServer = (*Service)(nil)

// New loads files (see [config.Load]) and serves them on store. A set of
// files that does not load, or a rule Sluice cannot enforce, is an error:
// nothing is registered or left open then.
func New(files []config.File, store sluice.Store, opts Options) (*Service, error) {
	if ext.IsNil(store) {
		return nil, errors.New("envoyratelimit: the store must not be nil")
	}
	if !(opts.NearLimitRatio >= 0) || math.IsInf(opts.NearLimitRatio, 1) {
		return nil, fmt.Errorf("envoyratelimit: near limit ratio %v: want a finite ratio, at least 0 (0: 0.8)", opts.NearLimitRatio)
	}
	if opts.NearLimitRatio == 0 {
		opts.NearLimitRatio = 0.8
	}
	if opts.LimitHeader == "" {
		opts.LimitHeader = "RateLimit-Limit"
	}
	if opts.RemainingHeader == "" {
		opts.RemainingHeader = "RateLimit-Remaining"
	}
	if opts.ResetHeader == "" {
		opts.ResetHeader = "RateLimit-Reset"
	}
	s := &Service{store: store, opts: opts, logger: opts.Logger, clock: opts.Clock}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if s.clock == nil {
		s.clock = sluice.SystemClock{}
	}
	st, err := s.build(files, opts.Overlay)
	if err != nil {
		return nil, err
	}
	s.metrics = newMetrics()
	if opts.Registerer != nil {
		if err := s.metrics.register(opts.Registerer); err != nil {
			_ = st.close()
			return nil, fmt.Errorf("envoyratelimit: metrics: %w", err)
		}
	}
	s.metrics.loadSuccess.Inc()
	s.cur.Store(st)
	return s, nil
}

// Reload replaces the configuration with files, all or nothing: a set
// that does not load keeps the one in force, counts config_load_error,
// logs the error and returns it. Calls in flight finish on the
// configuration they started with.
func (s *Service) Reload(files []config.File) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reload(files, s.opts.Overlay)
}

// ReloadOverlay is [Service.Reload] with overlay (nil: none) in place of
// Options.Overlay: the files and the overlay are taken together or not at
// all.
func (s *Service) ReloadOverlay(files []config.File, overlay map[string]stack.Spec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reload(files, overlay); err != nil {
		return err
	}
	s.opts.Overlay = overlay
	return nil
}

func (s *Service) reload(files []config.File, overlay map[string]stack.Spec) error {
	if s.closed {
		return errors.New("envoyratelimit: reload after Close")
	}
	st, err := s.build(files, overlay)
	if err != nil {
		s.metrics.loadError.Inc()
		s.logger.Error("envoyratelimit: the new configuration was not loaded; the previous one stays in force", "error", err)
		return err
	}
	s.metrics.loadSuccess.Inc()
	old := s.cur.Swap(st)
	s.logger.Info("envoyratelimit: configuration loaded", "domains", st.cfg.Domains(), "rules", len(st.stacks))
	if old != nil {
		return old.close()
	}
	return nil
}

// Close waits for the calls in flight and closes the limiters (a lease
// gives its tokens back). Later calls answer gRPC Unavailable. It is safe
// to call twice.
func (s *Service) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if old := s.cur.Swap(nil); old != nil {
		return old.close()
	}
	return nil
}

// Dump is the configuration in force as envoyproxy/ratelimit's /rlconfig
// debug endpoint prints it (see [config.Config.Dump]); "" after Close.
func (s *Service) Dump() string {
	st := s.acquire()
	if st == nil {
		return ""
	}
	defer st.mu.RUnlock()
	return st.cfg.Dump()
}

// Loaded reports whether the configuration in force has at least one
// domain (for a health check; envoyproxy/ratelimit's
// HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED). It is false after Close.
func (s *Service) Loaded() bool {
	st := s.cur.Load()
	return st != nil && st.cfg.Domains() > 0
}

// state is one loaded configuration with its limiters.
type state struct {
	cfg      *config.Config
	stacks   map[int]*stack.Stack // by config.Rule.Index: every rule that counts
	override *stack.Stack         // per-request limits: the fixed window

	mu     sync.RWMutex // held for reading by every call in flight
	closed bool
}

func (st *state) close() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil
	}
	st.closed = true
	var errs []error
	for _, s := range st.stacks {
		errs = append(errs, s.Close())
	}
	if st.override != nil {
		errs = append(errs, st.override.Close())
	}
	return errors.Join(errs...)
}

// acquire returns the state in force, held for reading, or nil once
// closed.
func (s *Service) acquire() *state {
	for {
		st := s.cur.Load()
		if st == nil {
			return nil
		}
		st.mu.RLock()
		if !st.closed {
			return st
		}
		st.mu.RUnlock()
	}
}

// build loads files and builds a stack for every rule that counts, each
// as overlay chooses.
func (s *Service) build(files []config.File, overlay map[string]stack.Spec) (*state, error) {
	cfg, err := config.Load(files, s.opts.MergeDomainConfig)
	if err != nil {
		return nil, err
	}
	st := &state{cfg: cfg, stacks: map[int]*stack.Stack{}}
	fail := func(err error) (*state, error) {
		_ = st.close()
		return nil, err
	}
	used := map[string]bool{}
	for _, r := range cfg.Rules() {
		spec, named, err := specOf(r, overlay, used)
		if err != nil {
			return fail(err)
		}
		if r.Unlimited || (r.RequestsPerUnit == 0 && named == "") {
			continue // never counted
		}
		b, err := stack.Build(spec, s.store)
		if err != nil {
			return fail(fmt.Errorf("envoyratelimit: rule %s (%d per %s): %w", describeRule(r, named), r.RequestsPerUnit, r.Unit, err))
		}
		st.stacks[r.Index] = b
	}
	for k := range overlay {
		if !used[k] {
			return fail(fmt.Errorf("envoyratelimit: overlay %q: no rule has this name or stat key", k))
		}
	}
	if st.override, err = stack.Build(stack.Spec{Algorithm: "fixedwindow", Rate: 1, Period: stack.Duration(time.Second)}, s.store); err != nil {
		return fail(err)
	}
	return st, nil
}

func describeRule(r config.Rule, overlay string) string {
	d := r.Key
	if r.Name != "" {
		d += fmt.Sprintf(" (name %q)", r.Name)
	}
	if overlay != "" {
		d += fmt.Sprintf(", overlay %q", overlay)
	}
	return d
}

// specOf is rule r's stack: the overlay's entry for its name or key, its
// zero rate and period filled in (and its algorithm, the rule's fixed
// window, when it names none), or the fixed window of the rule. named is
// the overlay entry used ("" for none).
func specOf(r config.Rule, overlay map[string]stack.Spec, used map[string]bool) (spec stack.Spec, named string, err error) {
	spec = stack.Spec{Algorithm: "fixedwindow", Rate: stack.Int(r.RequestsPerUnit), Period: stack.Duration(config.Period(r.Unit))}
	for _, k := range []string{r.Name, r.Key} {
		o, ok := overlay[k]
		if k == "" || !ok {
			continue
		}
		if named != "" {
			return spec, "", fmt.Errorf("envoyratelimit: overlay %q and %q both choose rule %s", named, k, r.Key)
		}
		if r.Unlimited {
			return spec, "", fmt.Errorf("envoyratelimit: overlay %q: rule %s is unlimited", k, r.Key)
		}
		named, used[k] = k, true
		if o.Algorithm == "" {
			o.Algorithm = "fixedwindow" // the rule's own: the overlay changes only what it names
		}
		if len(o.HotKeys) > 0 {
			o.HotKeys = hotKeyTags(o.HotKeys)
		}
		if o.Rate == 0 {
			o.Rate = stack.Int(r.RequestsPerUnit)
		}
		if o.Period == 0 {
			o.Period = stack.Duration(config.Period(r.Unit))
		}
		spec = o
	}
	return spec, named, nil
}

// ShouldRateLimit decides a request as envoyproxy/ratelimit does (see the
// package documentation for the differences). An empty domain or no
// descriptor is a gRPC Unknown error as there; so is a store that fails
// (counted as should_rate_limit redis_error), which Envoy's
// failure_mode_deny decides.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if req.GetDomain() == "" {
		s.metrics.callError("service_error")
		return nil, status.Error(codes.Unknown, "rate limit domain must not be empty")
	}
	if len(req.GetDescriptors()) == 0 {
		s.metrics.callError("service_error")
		return nil, status.Error(codes.Unknown, "rate limit descriptor list must not be empty")
	}
	st := s.acquire()
	if st == nil {
		return nil, status.Error(codes.Unavailable, "the rate limit service is closed")
	}
	defer st.mu.RUnlock()
	return s.decide(ctx, st, req)
}

// hotKeyTags turns an overlay's hot keys, each a descriptor's values (a
// descriptor of several entries: its values in order, joined by ','), into
// the hash tags of their counters' keys (see counterKey), which lease and
// shard choose hot keys by.
func hotKeyTags(hot []string) []string {
	out := make([]string, len(hot))
	for i, h := range hot {
		out[i] = bounded(config.Tag(strings.Split(h, ",")), 64)
	}
	return out
}
