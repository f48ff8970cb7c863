package fallback

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
)

// Option configures a [Limiter]. A nil Option is an error, as is an
// option given a bad value.
type Option func(*config) error

type config struct {
	policy      Policy
	timeout     time.Duration
	threshold   int
	cooldown    time.Duration
	probes      int
	onChange    func(from, to BreakerState)
	maxInFlight int
	clock       sluice.Clock
	detached    bool
}

// WithPolicy sets what decides while the store is unavailable. The default
// is [Open].
func WithPolicy(p Policy) Option {
	return func(c *config) error {
		if p == nil {
			return errors.New("fallback: WithPolicy(nil): omit the option for Open")
		}
		c.policy = p
		return nil
	}
}

// WithTimeout sets the time budget of one call to the store. The default
// is [DefaultTimeout].
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("fallback: WithTimeout(%s): must be positive", d)
		}
		c.timeout = d
		return nil
	}
}

// WithBreaker sets how many consecutive failures open the breaker, how
// long it stays open, and how many probes it lets through half-open. The
// defaults are [DefaultFailureThreshold], [DefaultCooldown] and
// [DefaultProbes].
func WithBreaker(failures int, cooldown time.Duration, probes int) Option {
	return func(c *config) error {
		if failures < 1 || cooldown <= 0 || probes < 1 {
			return fmt.Errorf("fallback: WithBreaker(%d, %s, %d): each must be positive", failures, cooldown, probes)
		}
		c.threshold, c.cooldown, c.probes = failures, cooldown, probes
		return nil
	}
}

// WithMaxInFlight bounds the calls in flight to the wrapped limiter at
// once (at least 1; default [DefaultMaxInFlight]). Beyond it, the policy
// decides, so that a stalled store cannot pile up callers. A call counts
// until the wrapped limiter returns, even one that exceeded its budget
// under [WithDetachedCalls].
func WithMaxInFlight(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("fallback: WithMaxInFlight(%d): must be at least 1", n)
		}
		c.maxInFlight = n
		return nil
	}
}

// WithStateChange sets a function called once for every change of the
// breaker's state. It must not block.
func WithStateChange(f func(from, to BreakerState)) Option {
	return func(c *config) error {
		if f == nil {
			return errors.New("fallback: WithStateChange(nil): omit the option to be told nothing")
		}
		c.onChange = f
		return nil
	}
}

// WithClock sets the clock the breaker's cooldown is measured by (default
// the system clock). The budget is a context deadline, on the runtime's
// timers: a test of it moves time with testing/synctest.
func WithClock(clock sluice.Clock) Option {
	return func(c *config) error {
		if clock == nil {
			return errors.New("fallback: WithClock(nil): omit the option for the system clock")
		}
		c.clock = clock
		return nil
	}
}

// WithDetachedCalls runs each call to the store on a goroutine of its own,
// so that the budget holds even with a client that does not honour the
// context's deadline (go-redis without ContextTimeoutEnabled): the caller
// stops waiting at the deadline while the call finishes in the
// background. It costs a goroutine, a channel and a timer per call. By
// default a call runs on the caller's goroutine under the budget's
// context, which rueidis, and go-redis with ContextTimeoutEnabled, honour.
func WithDetachedCalls() Option {
	return func(c *config) error {
		c.detached = true
		return nil
	}
}
