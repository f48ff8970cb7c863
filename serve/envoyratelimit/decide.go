package envoyratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/serve/envoyratelimit/config"
	"github.com/sluicehq/sluice/stack"
)

// decide answers req under st, which the caller holds.
func (s *Service) decide(ctx context.Context, st *state, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	descs := req.GetDescriptors()
	limits := make([]*config.Limit, len(descs))
	unlimited := make([]bool, len(descs))
	replaced := map[string]bool{}
	known := st.cfg.HasDomain(req.GetDomain())
	for i, d := range descs {
		if !known {
			s.metrics.domainNotFound(req.GetDomain())
			continue
		}
		l := st.cfg.Limit(req.GetDomain(), d)
		if l == nil {
			continue
		}
		for _, r := range l.Replaces {
			replaced[r] = true
		}
		if l.Unlimited {
			unlimited[i] = true
			continue
		}
		limits[i] = l
	}
	for i, l := range limits {
		if l != nil && l.Name != "" && replaced[l.Name] {
			limits[i] = nil
		}
	}

	resp := &rlsv3.RateLimitResponse{Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(descs))}
	overall := rlsv3.RateLimitResponse_OK
	var closest *rlsv3.RateLimitResponse_DescriptorStatus
	minRemaining := uint32(math.MaxUint32)
	for i, d := range descs {
		hits := uint64(max(1, req.GetHitsAddend()))
		if h := d.GetHitsAddend(); h != nil {
			hits = h.GetValue()
		}
		ds := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
		if limits[i] != nil {
			var err error
			if ds, err = s.decideOne(ctx, st, req.GetDomain(), limits[i], hits); err != nil {
				return nil, err
			}
		}
		if s.opts.ResponseHeaders && ds.CurrentLimit != nil && ds.LimitRemaining < minRemaining {
			closest, minRemaining = ds, ds.LimitRemaining
		}
		if unlimited[i] {
			resp.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}
			continue
		}
		resp.Statuses[i] = ds
		if ds.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
			if limits[i].QuotaMode {
				resp.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{
					Code: rlsv3.RateLimitResponse_OK, CurrentLimit: ds.CurrentLimit, LimitRemaining: ds.LimitRemaining}
				continue
			}
			overall = rlsv3.RateLimitResponse_OVER_LIMIT
			closest, minRemaining = ds, 0
		}
	}
	if s.opts.ResponseHeaders && closest != nil {
		resp.ResponseHeadersToAdd = []*corev3.HeaderValue{
			{Key: s.opts.LimitHeader, Value: strconv.FormatUint(uint64(closest.CurrentLimit.GetRequestsPerUnit()), 10)},
			{Key: s.opts.RemainingHeader, Value: strconv.FormatUint(uint64(closest.LimitRemaining), 10)},
			{Key: s.opts.ResetHeader, Value: strconv.FormatInt(s.windowReset(closest.CurrentLimit.GetUnit(), 0).GetSeconds(), 10)},
		}
	}
	if overall == rlsv3.RateLimitResponse_OVER_LIMIT && s.opts.ShadowMode {
		overall = rlsv3.RateLimitResponse_OK
		s.metrics.globalShadow.Inc()
	}
	resp.OverallCode = overall
	return resp, nil
}

// decideOne counts hits against l and answers its status, recording its
// metrics as envoyproxy/ratelimit does.
func (s *Service) decideOne(ctx context.Context, st *state, domain string, l *config.Limit, hits uint64) (*rlsv3.RateLimitResponse_DescriptorStatus, error) {
	stats := s.metrics.limitStats(l.FullKey)
	stats.add(statTotalHits, hits)
	perUnit := uint64(l.RequestsPerUnit)

	var before, after, threshold uint64
	var remaining uint64
	var over bool
	var reset time.Duration
	b := st.stacks[l.RuleIndex]
	if l.Override {
		b = st.override
	}
	if l.Override && l.Period == 0 {
		s.metrics.callError("service_error")
		return nil, status.Errorf(codes.Unknown, "descriptor %s: unit %s: not one of SECOND to YEAR", l.FullKey, l.Unit)
	}
	switch {
	case perUnit == 0 && (b == nil || l.Override):
		// Nothing is ever allowed, nor counted. A check (no hits) is over
		// when the counter holds anything, which an override of the same
		// descriptor may have counted.
		after, over = hits, hits > 0
		if hits == 0 {
			key := counterKey(s.opts.CacheKeyPrefix, domain, st.override, l)
			d, err := st.override.AllowN(ctx, key, sluice.Limit{Rate: 1, Period: l.Period, Burst: 1}, 0)
			if err != nil {
				s.metrics.callError("redis_error")
				return nil, status.Errorf(codes.Unknown, "store: %v", err)
			}
			over, reset = d.Remaining == 0, d.ResetAfter
		}
	case b == nil:
		s.metrics.callError("service_error")
		return nil, status.Errorf(codes.Unknown, "no limiter for rule %s", l.Rule) // every counting rule has one
	default:
		limit, capacity, declared, err := sluiceLimit(b, l)
		if err != nil {
			s.metrics.callError("service_error")
			return nil, status.Errorf(codes.Unknown, "descriptor %s: %v", l.FullKey, err)
		}
		threshold = uint64(declared)
		beyond := uint64(declared - capacity) // allowed as configured beyond what is counted
		n := int64(min(hits, uint64(math.MaxInt64)))
		key := counterKey(s.opts.CacheKeyPrefix, domain, b, l)
		if n == 0 && b.AlgorithmName() == "fixedwindow" {
			// A check of a fixed window is over when the counter holds
			// more than the limit in force, which a lowered override or a
			// reload can leave: a peek under one more than the limit
			// tells more from as many.
			if checkOver, checkRemaining, checkReset, ok := peekAbove(ctx, b, key, limit); ok {
				if checkOver {
					before, after, over = threshold+1, threshold+1, true
				} else {
					used := uint64(capacity) - checkRemaining
					before, after, remaining = used, used, checkRemaining+beyond
				}
				reset = checkReset
				break
			}
		}
		d, err := b.AllowN(ctx, key, limit, n)
		if errors.Is(err, sluice.ErrCostExceedsBurst) {
			// More than the limit at once: over the limit, never an error.
			// A peek says how much was counted, for the metrics.
			d, err = b.AllowN(ctx, key, limit, 0)
			d.Allowed = false
		}
		if err != nil {
			s.metrics.callError("redis_error")
			return nil, status.Errorf(codes.Unknown, "store: %v", err)
		}
		used := uint64(max(capacity-d.Remaining, 0))
		remaining = uint64(max(d.Remaining, 0)) + beyond
		switch {
		case n == 0: // a check only: OK up to the limit itself
			before, after = used, used
		case !d.Allowed: // nothing was charged
			before, after, over = used, used+hits, true
		default:
			before, after = used-min(used, hits), used
		}
		reset = d.ResetAfter
		if over && d.RetryAfter > 0 {
			reset = d.RetryAfter
		}
	}

	ds := &rlsv3.RateLimitResponse_DescriptorStatus{CurrentLimit: l.Current, DurationUntilReset: s.windowReset(l.Unit, reset)}
	nearThreshold := uint64(math.Floor(float64(float32(threshold) * float32(s.opts.NearLimitRatio))))
	if over {
		ds.Code = rlsv3.RateLimitResponse_OVER_LIMIT
		if before >= threshold {
			stats.add(statOverLimit, hits)
		} else {
			stats.add(statOverLimit, sub(after, threshold))
			stats.add(statNearLimit, sub(threshold, max(nearThreshold, before)))
		}
	} else {
		ds.Code = rlsv3.RateLimitResponse_OK
		ds.LimitRemaining = uint32(min(remaining, math.MaxUint32))
		if after > nearThreshold {
			if before >= nearThreshold {
				stats.add(statNearLimit, hits)
			} else {
				stats.add(statNearLimit, after-nearThreshold)
			}
		}
		stats.add(statWithinLimit, hits)
	}
	if over && l.ShadowMode {
		ds.Code = rlsv3.RateLimitResponse_OK
		if before >= threshold {
			stats.add(statShadowMode, hits)
		} else {
			stats.add(statShadowMode, sub(after, threshold))
		}
	}
	return ds, nil
}

// sluiceLimit is the limit l is counted under by b, how many hits that
// holds (capacity: its burst for a bucket, its rate for a window), and
// how many l allows as configured (declared): the request's own for an
// override, else the rule's stack's (its fixed window, or the overlay's).
// The two differ only for an override above what a fixed window counts
// (one hit a microsecond, 1,000,000 a second), which is counted at that
// ceiling rather than failing the request.
func sluiceLimit(b *stack.Stack, l *config.Limit) (limit sluice.Limit, capacity, declared int64, err error) {
	limit = b.Limit()
	if l.Override {
		if l.Period == 0 {
			return limit, 0, 0, fmt.Errorf("unit %s: not one of SECOND to YEAR", l.Unit)
		}
		declared = int64(l.RequestsPerUnit)
		rate := min(declared, l.Period.Microseconds())
		limit = sluice.Limit{Rate: rate, Period: l.Period, Burst: rate}
		if err := limit.Validate(); err != nil {
			return limit, 0, 0, err
		}
		return limit, rate, declared, nil
	}
	if b.Refills() {
		return limit, limit.Burst, limit.Burst, nil
	}
	return limit, limit.Rate, limit.Rate, nil
}

// sub is a - b, or 0 when b is larger.
func sub(a, b uint64) uint64 { return a - min(a, b) }

// counterKey is the Redis key of l's counter: the descriptor's values as
// the hash tag (a tenant's counters share a Cluster slot), then the
// prefix, the domain, the algorithm and the descriptor's keys and values.
// Long parts are replaced by their SHA-256.
func counterKey(prefix, domain string, b *stack.Stack, l *config.Limit) string {
	return sluice.Key(bounded(l.Tag, 64), "erl", prefix, domain, b.AlgorithmName(), l.Unit.String(), bounded(l.ID, 128))
}

// peekAbove peeks at a fixed window's counter under one more than limit:
// over when the counter holds more than limit, else what is left under
// limit. ok is false when that cannot be asked (the limit at its largest,
// or a store error, which the caller's own call then reports).
func peekAbove(ctx context.Context, b *stack.Stack, key string, limit sluice.Limit) (over bool, remaining uint64, reset time.Duration, ok bool) {
	above := sluice.Limit{Rate: limit.Rate + 1, Period: limit.Period, Burst: limit.Burst + 1}
	if above.Validate() != nil {
		return false, 0, 0, false
	}
	d, err := b.AllowN(ctx, key, above, 0)
	if err != nil {
		return false, 0, 0, false
	}
	if d.Remaining <= 0 {
		return true, 0, d.ResetAfter, true
	}
	return false, uint64(d.Remaining - 1), d.ResetAfter, true
}

func bounded(s string, n int) string {
	if len(s) <= n {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "sha256-" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// windowReset is duration_until_reset: the store's figure when it gave
// one, else the time to the end of the unit's epoch-aligned window on the
// service's clock, in whole seconds rounded up as envoyproxy/ratelimit
// gives it.
func (s *Service) windowReset(unit rlsv3.RateLimitResponse_RateLimit_Unit, fromStore time.Duration) *durationpb.Duration {
	if fromStore > 0 {
		return &durationpb.Duration{Seconds: int64((fromStore + time.Second - 1) / time.Second)}
	}
	period := int64(config.Period(unit) / time.Second)
	if period == 0 {
		return &durationpb.Duration{}
	}
	now := s.clock.Now().Unix()
	return &durationpb.Duration{Seconds: period - now%period}
}
