package tokenbucket

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
)

//go:embed tokenbucket.lua
var source string

var script = sluice.NewScript(source, runLocal)

// Script returns the token bucket's Lua script paired with its Go model,
// for stores that preload scripts (goredisstore.Store.Load) and for tests
// that call it with raw arguments.
func Script() *sluice.Script { return script }

// KeySuffix is appended to the caller's key to name the bucket's Redis key,
// so that two algorithms given the same key never read each other's state.
// It keeps the key's hash tag, and so its Redis Cluster slot.
const KeySuffix = ":tb"

// maxReplyMicros bounds the durations a reply may carry: a deficit after
// the clock went back to 1970 from 2100, plus a full bucket. Anything
// larger is not a reply of this script.
const maxReplyMicros = maxNowMicros + 2*maxFillMicros

// Limiter is a token bucket limiter on a [sluice.Store]. It is safe for
// concurrent use.
type Limiter struct {
	store sluice.Store
	clock sluice.Clock // nil: the script reads the server clock
}

var _ sluice.Limiter = (*Limiter)(nil)

// Option configures a [Limiter].
type Option interface{ apply(*Limiter) error }

type optionFunc func(*Limiter) error

func (f optionFunc) apply(l *Limiter) error { return f(l) }

// WithClock makes the limiter send clock's time with every call instead of
// letting the script read the Redis server clock (client-clock mode). The
// default is the server clock, which is what production callers want; see
// the package documentation before changing it.
func WithClock(clock sluice.Clock) Option {
	return optionFunc(func(l *Limiter) error {
		if clock == nil {
			return errors.New("tokenbucket: WithClock(nil): omit the option to use the server clock")
		}
		l.clock = clock
		return nil
	})
}

// New returns a token bucket limiter on store. It does no I/O.
func New(store sluice.Store, opts ...Option) (*Limiter, error) {
	if store == nil {
		return nil, errors.New("tokenbucket: store must not be nil")
	}
	l := &Limiter{store: store}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("tokenbucket: nil option")
		}
		if err := o.apply(l); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// AllowN decides whether n tokens can be taken from the bucket at key under
// limit, and takes them if so. n == 0 peeks. A denial is a Decision with
// Allowed false; an error means no decision was made.
func (l *Limiter) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	if err := sluice.ValidateKey(key); err != nil {
		return sluice.Decision{}, fmt.Errorf("tokenbucket: %w", err)
	}
	if err := ValidateLimit(limit); err != nil {
		return sluice.Decision{}, err
	}
	if err := limit.ValidateCost(n); err != nil {
		return sluice.Decision{}, fmt.Errorf("tokenbucket: %w", err)
	}
	args := make([]int64, 4, 5)
	args[0], args[1], args[2], args[3] = limit.Rate, limit.PeriodMicros(), limit.Burst, n
	if l.clock != nil {
		t := l.clock.Now()
		now := t.UnixMicro()
		if now < 0 || now > maxNowMicros {
			return sluice.Decision{}, fmt.Errorf("tokenbucket: the clock reads %s, outside the years 1970 to 2100", t)
		}
		args = append(args, now)
	}
	reply, err := l.store.Run(ctx, script, []string{key + KeySuffix}, args)
	if err != nil {
		return sluice.Decision{}, fmt.Errorf("tokenbucket: %w", sluice.ScriptError(err))
	}
	return parseReply(reply, limit)
}

// ValidateLimit reports whether the token bucket can enforce limit: it must
// pass [sluice.Limit.Validate], and Period / Rate rounded up to whole
// microseconds (the bucket's refill interval) must be within 1% of its
// exact value, so that the enforced rate is never more than 1% below Rate.
// Every limit up to 10,000 per second passes, and any limit whose
// Period / Rate is a whole number of microseconds.
func ValidateLimit(limit sluice.Limit) error {
	if err := limit.Validate(); err != nil {
		return fmt.Errorf("tokenbucket: %w", err)
	}
	periodUs := limit.PeriodMicros()
	if imprecise(limit.Rate, periodUs, (periodUs+limit.Rate-1)/limit.Rate) {
		return fmt.Errorf("tokenbucket: %w", sluice.NewLimitError(limit,
			"period / rate must be within 1% of a whole number of microseconds (the refill interval's resolution); "+
				"choose a rate that divides the period, or split the key"))
	}
	return nil
}

// parseReply turns the script's reply into a Decision, checking its shape.
func parseReply(reply []int64, limit sluice.Limit) (sluice.Decision, error) {
	if len(reply) != 4 {
		return sluice.Decision{}, fmt.Errorf("tokenbucket: %w: %d values, want 4", sluice.ErrUnexpectedReply, len(reply))
	}
	allowed, remaining, retryUs, resetUs := reply[0], reply[1], reply[2], reply[3]
	valid := (allowed == 1 && retryUs == 0 || allowed == 0 && retryUs > 0) &&
		remaining >= 0 && remaining <= limit.Burst &&
		retryUs <= maxReplyMicros && resetUs >= 0 && resetUs <= maxReplyMicros
	if !valid {
		return sluice.Decision{}, fmt.Errorf("tokenbucket: %w: %v", sluice.ErrUnexpectedReply, reply)
	}
	return sluice.Decision{
		Allowed:    allowed == 1,
		Limit:      limit,
		Remaining:  remaining,
		RetryAfter: time.Duration(retryUs) * time.Microsecond,
		ResetAfter: time.Duration(resetUs) * time.Microsecond,
	}, nil
}
