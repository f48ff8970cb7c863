package fallback

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
)

// Policy decides requests while the store is unavailable. Build one with
// [Open], [Closed] or [Local].
type Policy interface {
	decide(ctx context.Context, l *Limiter, key string, limit sluice.Limit, n int64) (sluice.Decision, error)
}

type openPolicy struct{}

// Open allows every request while the store is unavailable (fail open).
// The decision counts nothing: Remaining and ResetAfter are zero, meaning
// unknown, and Source is [sluice.SourceFallbackOpen].
func Open() Policy { return openPolicy{} }

func (openPolicy) decide(_ context.Context, _ *Limiter, _ string, limit sluice.Limit, _ int64) (sluice.Decision, error) {
	return sluice.Decision{Allowed: true, Limit: limit, Source: sluice.SourceFallbackOpen}, nil
}

type closedPolicy struct{}

// Closed denies every request while the store is unavailable (fail
// closed), with RetryAfter set to the breaker's cooldown, and Source
// [sluice.SourceFallbackClosed].
func Closed() Policy { return closedPolicy{} }

func (closedPolicy) decide(_ context.Context, l *Limiter, _ string, limit sluice.Limit, _ int64) (sluice.Decision, error) {
	return sluice.Decision{Limit: limit, RetryAfter: l.cooldown, Source: sluice.SourceFallbackClosed}, nil
}

type localPolicy struct {
	local    sluice.Limiter
	replicas func() int
}

// Local decides with local, an in-process limiter (use the same algorithm
// as the store's, on memstore), under the limit divided by the number of
// replicas that share it ([LocalShare], never above limit / N, made a
// limit the local algorithm accepts). replicas is called on every
// fallback decision, so it may follow a changing replica count; a result
// below 1 counts as 1. With N right, the N processes together admit at
// most max(Burst, N) + Rate × O during an outage of length O (each keeps
// a burst of at least 1; for a limit slower than N per 366 days, whose
// share LocalShare clamps, the refill term is N per 366 days). A request whose cost exceeds the local share is denied, with
// RetryAfter the breaker's cooldown. Decisions carry the local limit and
// Source [sluice.SourceFallbackLocal].
//
// Local state is separate from the store's: when the store comes back,
// its counts resume from where they were, so over an outage and recovery a
// key admits at most what the store allows plus what the local limiters
// allowed during the outage (docs/failure.md).
func Local(local sluice.Limiter, replicas func() int) (Policy, error) {
	if local == nil || replicas == nil {
		return nil, errors.New("fallback: Local needs a limiter and a replica count")
	}
	return localPolicy{local: local, replicas: replicas}, nil
}

// Replicas returns a replica count that never changes, for [Local].
func Replicas(n int) func() int { return func() int { return n } }

// LocalShare returns the limit the [Local] policy enforces in each of n
// replicas, never more than limit / n where a [sluice.Limit] can say so:
// Rate / n (rounded down) per Period, or, when Rate is below n, 1 per
// Period × ceil(n / Rate); and Burst / n (rounded down), at least 1, so
// that with Burst below n the replicas together allow a burst of n. The
// result is a valid Limit whenever limit is: a Period that would pass
// [sluice.MaxPeriod] is clamped to it (1 per 366 days, the slowest rate a
// Limit holds, so n replicas together then refill n per 366 days), and a
// Burst whose refill would pass [sluice.MaxFillTime] is lowered.
func LocalShare(limit sluice.Limit, n int) sluice.Limit {
	n64 := int64(max(n, 1))
	if limit.Rate >= n64 {
		limit.Rate /= n64
	} else {
		stretch := (n64 + limit.Rate - 1) / limit.Rate
		if limit.Period > sluice.MaxPeriod/time.Duration(stretch) {
			limit.Period = sluice.MaxPeriod
		} else {
			limit.Period *= time.Duration(stretch)
		}
		limit.Rate = 1
	}
	limit.Burst = max(limit.Burst/n64, 1)
	return fitFill(limit)
}

// fitFill lowers limit's Burst, never below 1, until refilling it takes
// at most sluice.MaxFillTime.
func fitFill(limit sluice.Limit) sluice.Limit {
	if limit.Rate < 1 || limit.Period < sluice.MinPeriod {
		return limit
	}
	interval := (limit.PeriodMicros() + limit.Rate - 1) / limit.Rate
	limit.Burst = max(1, min(limit.Burst, sluice.MaxFillTime.Microseconds()/max(interval, 1)))
	return limit
}

// validShare returns share, or, when the local algorithm refuses it (the
// bucket algorithms' interval rule: 33,333/s is not within 1% of whole
// microseconds), the same interval between tokens on a whole number of
// them: the same Rate over a Period a little longer, or, where that would
// pass sluice.MaxPeriod, fewer tokens over a Period within it. Either
// admits a little less, never more.
func (p localPolicy) validShare(key string, share sluice.Limit) sluice.Limit {
	if _, err := ext.Capacity(p.local, key, share); !errors.Is(err, sluice.ErrInvalidLimit) {
		return share
	}
	interval := (share.PeriodMicros() + share.Rate - 1) / share.Rate
	share.Rate = min(share.Rate, sluice.MaxPeriod.Microseconds()/interval)
	share.Period = time.Duration(interval*share.Rate) * time.Microsecond
	return fitFill(share)
}

func (p localPolicy) decide(ctx context.Context, l *Limiter, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	share := p.validShare(key, LocalShare(limit, p.replicas()))
	d, err := p.local.AllowN(ctx, key, share, n)
	switch {
	case errors.Is(err, sluice.ErrCostExceedsBurst):
		return sluice.Decision{Limit: share, RetryAfter: l.cooldown, Source: sluice.SourceFallbackLocal}, nil
	case err != nil:
		return sluice.Decision{}, fmt.Errorf("fallback: local limiter: %w", err)
	}
	d.Source = sluice.SourceFallbackLocal
	return d, nil
}
