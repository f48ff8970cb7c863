package fallback

import (
	"errors"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// BreakerState is the state of the circuit breaker.
type BreakerState int

const (
	// BreakerClosed: calls go to the store.
	BreakerClosed BreakerState = iota
	// BreakerHalfOpen: a few probe calls go to the store.
	BreakerHalfOpen
	// BreakerOpen: no call goes to the store; the policy decides.
	BreakerOpen
)

func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerHalfOpen:
		return "half-open"
	case BreakerOpen:
		return "open"
	}
	return "unknown"
}

// errExcluded is reported to the breaker for an outcome that says nothing
// about the store's health: neither a success nor a failure.
var errExcluded = errors.New("fallback: excluded from the breaker's counts")

// breaker is a two-step circuit breaker on a Clock: allow before a call,
// then its outcome to the func allow returned. Closed, failures in a row
// open it; open, it lets nothing through until the cooldown has passed,
// then half-opens; half-open, it lets probes through at once, and as many
// successes in a row close it while one failure opens it again. An
// outcome reported as errExcluded counts as neither (and frees its
// probe); an outcome from before the last change of state is ignored. It
// keeps no timer: the state moves when it is asked.
type breaker struct {
	clock     sluice.Clock
	threshold int
	cooldown  time.Duration
	probes    int
	onChange  func(from, to BreakerState) // nil: nobody is told

	mu         sync.Mutex
	state      BreakerState
	generation uint64    // moves with every change of state
	reopens    time.Time // open: when it half-opens
	failures   int       // closed: consecutive failures
	inFlight   int       // half-open: probes let through, not yet excluded
	successes  int       // half-open: consecutive successes
}

// allow reports whether a call may go to the store, and if so returns the
// func that takes its outcome (nil for a success).
func (b *breaker) allow() (func(error), bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance(b.clock.Now())
	switch {
	case b.state == BreakerOpen:
		return nil, false
	case b.state == BreakerHalfOpen && b.inFlight >= b.probes:
		return nil, false
	case b.state == BreakerHalfOpen:
		b.inFlight++
	}
	generation := b.generation
	return func(err error) { b.report(generation, err) }, true
}

func (b *breaker) report(generation uint64, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	b.advance(now)
	if generation != b.generation {
		return // the state changed since the call began
	}
	switch {
	case errors.Is(err, errExcluded):
		if b.state == BreakerHalfOpen {
			b.inFlight--
		}
	case err == nil && b.state == BreakerClosed:
		b.failures = 0
	case err == nil && b.state == BreakerHalfOpen:
		if b.successes++; b.successes >= b.probes {
			b.set(BreakerClosed, now)
		}
	case b.state == BreakerClosed:
		if b.failures++; b.failures >= b.threshold {
			b.set(BreakerOpen, now)
		}
	case b.state == BreakerHalfOpen:
		b.set(BreakerOpen, now)
	}
}

// current returns the state at the clock's time.
func (b *breaker) current() BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance(b.clock.Now())
	return b.state
}

// advance half-opens an open breaker whose cooldown has passed.
func (b *breaker) advance(now time.Time) {
	if b.state == BreakerOpen && !now.Before(b.reopens) {
		b.set(BreakerHalfOpen, now)
	}
}

func (b *breaker) set(to BreakerState, now time.Time) {
	from := b.state
	b.state = to
	b.generation++
	b.failures, b.inFlight, b.successes = 0, 0, 0
	if to == BreakerOpen {
		b.reopens = now.Add(b.cooldown)
	}
	if b.onChange != nil {
		b.onChange(from, to)
	}
}
