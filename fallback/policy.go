package fallback

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice"
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
// replicas that share it: Rate / N and Burst / N, rounded down but at
// least 1. replicas is called on every fallback decision, so it may follow
// a changing replica count; a result below 1 counts as 1. With N right,
// the N processes together admit at most the limit while the store is
// down. A request whose cost exceeds the local share is denied, with
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
// replicas: Rate / n and Burst / n, rounded down, at least 1.
func LocalShare(limit sluice.Limit, n int) sluice.Limit {
	n = max(n, 1)
	limit.Rate = max(limit.Rate/int64(n), 1)
	limit.Burst = max(limit.Burst/int64(n), 1)
	return limit
}

func (p localPolicy) decide(ctx context.Context, l *Limiter, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	share := LocalShare(limit, p.replicas())
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
