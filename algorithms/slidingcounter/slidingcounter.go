package slidingcounter

import (
	"context"
	_ "embed"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext/algorithm"
)

//go:embed slidingcounter.lua
var body string

// KeySuffix is appended to the caller's key to name the state's Redis key.
const KeySuffix = ":sc"

var spec = algorithm.Register(&algorithm.Spec{
	Name:        "slidingcounter",
	Body:        body,
	Decide:      decide,
	ResetScript: algorithm.DeleteScript,
	KeySuffix:   KeySuffix,
	Capacity:    func(l sluice.Limit) int64 { return l.Rate },
	// Three periods, seen from a clock gone back from 2100 to 1970.
	MaxReplyMicros: algorithm.MaxNowMicros + 3*31622400000000,
})

// Script returns the sliding window counter decision script paired with its Go
// model, for stores that preload scripts and for tests.
func Script() *sluice.Script { return spec.Script }

// Limiter is a sliding window counter limiter on a [sluice.Store]. It is safe for
// concurrent use.
type Limiter struct{ core *algorithm.Limiter }

var _ sluice.Limiter = (*Limiter)(nil)

// Option configures a [Limiter].
type Option = algorithm.Option

// WithClock makes the limiter send clock's time with every call instead of
// letting the script read the Redis server clock (client-clock mode, for
// tests). The default is the server clock.
func WithClock(clock sluice.Clock) Option { return algorithm.WithClock(clock) }

// New returns a sliding window counter limiter on store. It does no I/O.
func New(store sluice.Store, opts ...Option) (*Limiter, error) {
	core, err := algorithm.New(spec, store, opts...)
	if err != nil {
		return nil, err
	}
	return &Limiter{core: core}, nil
}

// AllowN decides whether a request of cost n fits the sliding estimate at
// key under limit, and counts it if so. n == 0 peeks. A denial is a
// Decision with Allowed false; an error means no decision was made.
func (l *Limiter) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	return l.core.AllowN(ctx, key, limit, n)
}

// Refund gives back n cost units (1 <= n <= Rate) to the current window's
// count, never below zero. What was counted in the previous window is not
// refunded (it is already fading out of the estimate). It returns the
// state after the refund.
func (l *Limiter) Refund(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	return l.core.Refund(ctx, key, limit, n)
}

// Reset deletes key's counts: the next request sees a fresh limit.
func (l *Limiter) Reset(ctx context.Context, key string) error { return l.core.Reset(ctx, key) }

var _ sluice.BatchLimiter = (*Limiter)(nil)

// AllowBatch decides reqs in one round trip, each as AllowN would, in
// order, at one instant (see [sluice.BatchLimiter]). On Redis Cluster all
// the keys must share a slot.
func (l *Limiter) AllowBatch(ctx context.Context, reqs []sluice.Request) ([]sluice.Result, error) {
	return l.core.AllowBatch(ctx, reqs)
}

// Capacity returns the largest cost a request under limit can ever be
// allowed, limit.Rate (one window's worth), or why the algorithm cannot enforce limit
// (see [sluice.Bounded]).
func (l *Limiter) Capacity(key string, limit sluice.Limit) (int64, error) {
	return l.core.Capacity(key, limit)
}

var (
	_ sluice.Refunder = (*Limiter)(nil)
	_ sluice.Resetter = (*Limiter)(nil)
	_ sluice.Bounded  = (*Limiter)(nil)
)
