// Package multilimit checks one request against several limits in one
// round trip, all or nothing: per tenant and per route, or per second and
// per day. If any limit denies, none is consumed.
//
// The limits are token buckets (the default algorithm), and each bucket is
// the very one tokenbucket.Limiter keeps for the same key, so a limit can
// be checked alone elsewhere and together here. All keys of one call must
// share a Redis Cluster slot: build them with sluice.Key and one tag
// (rl:{tenant:42}:...); keys that cannot share a slot are an error before
// anything is sent.
//
// The Decision says whether the request was allowed, which limit denied
// it (the first in the order given), the longest RetryAfter among the
// limits that denied (retrying then succeeds if nothing else consumed
// meanwhile), and each limit's own Decision (Remaining, RetryAfter,
// ResetAfter), which HTTP middleware can report per policy.
package multilimit

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/internal/scriptlimit"
)

//go:embed multilimit.lua
var source string

var script = sluice.NewScript(source, runLocal)

// Script returns the multi-limit script paired with its Go model.
func Script() *sluice.Script { return script }

const maxLimits = 16

// ErrCrossSlot is returned when the keys of one call cannot share a Redis
// Cluster slot.
var ErrCrossSlot = errors.New("multilimit: the keys of one call hash to different Redis Cluster slots; give them one hash tag (sluice.Key)")

// Check is one limit of a call: the key it counts under and the limit.
type Check struct {
	Key   string
	Limit sluice.Limit
}

// Decision is the outcome of one multi-limit call.
type Decision struct {
	// Allowed reports whether every limit allowed the request; only then
	// was anything consumed.
	Allowed bool
	// Denied is the index (in the checks given) of the first limit that
	// denied, or -1.
	Denied int
	// RetryAfter is the longest RetryAfter of the limits that denied.
	RetryAfter time.Duration
	// Limits holds each limit's own decision, in the order given.
	Limits []sluice.Decision
}

// Limiter checks several limits at once. It is safe for concurrent use.
type Limiter struct {
	store sluice.Store
	clock sluice.Clock
}

// Option configures a [Limiter].
type Option func(*Limiter) error

// WithClock sends clock's time instead of letting the script read the
// server clock (client-clock mode, for tests).
func WithClock(c sluice.Clock) Option {
	return func(l *Limiter) error {
		if c == nil {
			return errors.New("multilimit: WithClock(nil)")
		}
		l.clock = c
		return nil
	}
}

// New returns a Limiter on store. It does no I/O.
func New(store sluice.Store, opts ...Option) (*Limiter, error) {
	if store == nil {
		return nil, errors.New("multilimit: store must not be nil")
	}
	l := &Limiter{store: store}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("multilimit: nil option")
		}
		if err := o(l); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// AllowN checks a request of cost n against every check, all or nothing.
// n == 0 peeks.
func (l *Limiter) AllowN(ctx context.Context, checks []Check, n int64) (Decision, error) {
	if len(checks) == 0 || len(checks) > maxLimits {
		return Decision{}, fmt.Errorf("multilimit: %w: 1 to %d checks, got %d", sluice.ErrInvalidLimit, maxLimits, len(checks))
	}
	keys := make([]string, len(checks))
	args := make([]int64, 2, 3+3*len(checks))
	args[0], args[1] = n, int64(len(checks))
	for i, c := range checks {
		if err := sluice.ValidateKey(c.Key); err != nil {
			return Decision{}, fmt.Errorf("multilimit: check %d: %w", i, err)
		}
		if err := tokenbucket.ValidateLimit(c.Limit); err != nil {
			return Decision{}, fmt.Errorf("multilimit: check %d: %w", i, err)
		}
		if err := c.Limit.ValidateCost(n); err != nil {
			return Decision{}, fmt.Errorf("multilimit: check %d: %w", i, err)
		}
		keys[i] = c.Key + tokenbucket.KeySuffix
		if sluice.HashSlot(keys[i]) != sluice.HashSlot(keys[0]) {
			return Decision{}, ErrCrossSlot
		}
		args = append(args, c.Limit.Rate, c.Limit.PeriodMicros(), c.Limit.Burst)
	}
	if l.clock != nil {
		t := l.clock.Now()
		now := t.UnixMicro()
		if now < 0 || now > scriptlimit.MaxNowMicros {
			return Decision{}, fmt.Errorf("multilimit: the clock reads %s, outside the years 1970 to 2100", t)
		}
		args = append(args, now)
	}
	reply, err := l.store.Run(ctx, script, keys, args)
	if err != nil {
		return Decision{}, fmt.Errorf("multilimit: %w", sluice.ScriptError(err))
	}
	if len(reply) != 2+3*len(checks) || reply[0] != 0 && reply[0] != 1 || reply[1] < 0 || reply[1] > int64(len(checks)) {
		return Decision{}, fmt.Errorf("multilimit: %w: %v", sluice.ErrUnexpectedReply, reply)
	}
	d := Decision{Allowed: reply[0] == 1, Denied: int(reply[1]) - 1, Limits: make([]sluice.Decision, len(checks))}
	for i, c := range checks {
		remaining, retry, reset := reply[2+3*i], reply[3+3*i], reply[4+3*i]
		if remaining < 0 || remaining > c.Limit.Burst || retry < 0 || reset < 0 {
			return Decision{}, fmt.Errorf("multilimit: %w: %v", sluice.ErrUnexpectedReply, reply)
		}
		ld := sluice.Decision{
			Allowed:    retry == 0,
			Limit:      c.Limit,
			Remaining:  remaining,
			RetryAfter: time.Duration(retry) * time.Microsecond,
			ResetAfter: time.Duration(reset) * time.Microsecond,
		}
		d.Limits[i] = ld
		d.RetryAfter = max(d.RetryAfter, ld.RetryAfter)
	}
	return d, nil
}
