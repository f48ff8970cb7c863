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

// Breaker is the circuit breaker's settings for [WithBreaker]; a zero
// field keeps its default.
type Breaker struct {
	// Failures is how many consecutive failures open it (default
	// [DefaultFailureThreshold]).
	Failures int
	// Cooldown is how long it stays open before letting probes through
	// (default [DefaultCooldown]); the Closed policy's RetryAfter.
	Cooldown time.Duration
	// Probes is how many calls the half-open breaker lets through at once,
	// and how many successes in a row close it (default [DefaultProbes]).
	Probes int
}

// WithBreaker sets the circuit breaker's settings. A negative field is an
// error.
func WithBreaker(b Breaker) Option {
	return func(c *config) error {
		if b.Failures < 0 || b.Cooldown < 0 || b.Probes < 0 {
			return fmt.Errorf("fallback: WithBreaker(%+v): no field may be negative", b)
		}
		if b.Failures > 0 {
			c.threshold = b.Failures
		}
		if b.Cooldown > 0 {
			c.cooldown = b.Cooldown
		}
		if b.Probes > 0 {
			c.probes = b.Probes
		}
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
