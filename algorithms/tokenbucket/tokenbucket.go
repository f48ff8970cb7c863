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

// Script is the token bucket's Lua script paired with its Go model. Stores
// run it; [Limiter] sends it. It is exported for stores that preload scripts
// and for tests that call it with raw arguments.
var Script = sluice.NewScript(source, runLocal)

// Limiter is a token bucket limiter on a [sluice.Store]. It is safe for
// concurrent use.
type Limiter struct {
	store sluice.Store
	clock sluice.Clock // nil: the script reads the server clock
}

var _ sluice.Limiter = (*Limiter)(nil)

// Option configures a [Limiter].
type Option interface{ apply(*Limiter) }

type optionFunc func(*Limiter)

func (f optionFunc) apply(l *Limiter) { f(l) }

// WithClock makes the limiter send clock's time with every call instead of
// letting the script read the Redis server clock (client-clock mode). The
// default is the server clock, which is what production callers want; see
// the package documentation before changing it.
func WithClock(clock sluice.Clock) Option {
	return optionFunc(func(l *Limiter) { l.clock = clock })
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
		o.apply(l)
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
	if err := limit.Validate(); err != nil {
		return sluice.Decision{}, fmt.Errorf("tokenbucket: %w", err)
	}
	if err := limit.ValidateCost(n); err != nil {
		return sluice.Decision{}, fmt.Errorf("tokenbucket: %w", err)
	}
	args := make([]int64, 4, 5)
	args[0], args[1], args[2], args[3] = limit.Rate, limit.PeriodMicros(), limit.Burst, n
	if l.clock != nil {
		now := l.clock.Now().UnixMicro()
		if now < 0 || now > maxNowMicros {
			return sluice.Decision{}, fmt.Errorf("tokenbucket: %w: clock reads %s, outside 1970..2100", sluice.ErrInvalidLimit, l.clock.Now())
		}
		args = append(args, now)
	}
	reply, err := l.store.Run(ctx, Script, []string{key}, args)
	if err != nil {
		return sluice.Decision{}, fmt.Errorf("tokenbucket: %w", sluice.ScriptError(err))
	}
	return parseReply(reply, limit)
}

// parseReply turns the script's reply into a Decision, checking its shape.
func parseReply(reply []int64, limit sluice.Limit) (sluice.Decision, error) {
	if len(reply) != 4 {
		return sluice.Decision{}, fmt.Errorf("tokenbucket: %w: %d values, want 4", sluice.ErrUnexpectedReply, len(reply))
	}
	allowed, remaining, retryUs, resetUs := reply[0], reply[1], reply[2], reply[3]
	if allowed != 0 && allowed != 1 || remaining < 0 || remaining > limit.Burst || retryUs < 0 || resetUs < 0 {
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
