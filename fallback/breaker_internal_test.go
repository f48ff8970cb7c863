package fallback

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// manualClock is a clock the test moves. (sluicetest's imports this
// package, so an internal test cannot use it.)
type manualClock struct{ now time.Time }

func (c *manualClock) Now() time.Time          { return c.now }
func (c *manualClock) Advance(d time.Duration) { c.now = c.now.Add(d) }

// TestBreakerStates walks the breaker through every transition on a fake
// clock: failures in a row open it, the cooldown half-opens it, probes
// are let through up to their number (an excluded one frees its place),
// as many successes close it, and an outcome from before a change of
// state is ignored.
func TestBreakerStates(t *testing.T) {
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	var changes []string
	b := &breaker{clock: clock, threshold: 2, cooldown: time.Second, probes: 2,
		onChange: func(from, to BreakerState) { changes = append(changes, from.String()+">"+to.String()) }}
	fail := errors.New("connection refused")

	done, ok := b.allow()
	require.True(t, ok)
	done(fail)
	done, ok = b.allow()
	require.True(t, ok)
	done(nil) // a success resets the count
	for range 2 {
		done, ok = b.allow()
		require.True(t, ok)
		done(fail)
	}
	require.Equal(t, BreakerOpen, b.current())
	_, ok = b.allow()
	require.False(t, ok, "open: nothing goes through")

	clock.Advance(time.Second - time.Nanosecond)
	require.Equal(t, BreakerOpen, b.current())
	clock.Advance(time.Nanosecond)
	require.Equal(t, BreakerHalfOpen, b.current())
	probe1, ok := b.allow()
	require.True(t, ok)
	probe2, ok := b.allow()
	require.True(t, ok)
	_, ok = b.allow()
	require.False(t, ok, "two probes in flight: no third")
	probe2(errExcluded)
	probe3, ok := b.allow()
	require.True(t, ok, "an excluded probe frees its place")
	probe1(nil)
	require.Equal(t, BreakerHalfOpen, b.current(), "one success of two")
	probe3(nil)
	require.Equal(t, BreakerClosed, b.current(), "two successes close it")

	late, ok := b.allow()
	require.True(t, ok)
	for range 2 {
		done, ok = b.allow()
		require.True(t, ok)
		done(fail)
	}
	require.Equal(t, BreakerOpen, b.current())
	late(nil) // began before the breaker opened: ignored
	require.Equal(t, BreakerOpen, b.current())
	clock.Advance(time.Second)
	probe, ok := b.allow()
	require.True(t, ok)
	probe(fail)
	require.Equal(t, BreakerOpen, b.current(), "a failed probe opens it again")
	require.Equal(t, []string{"closed>open", "open>half-open", "half-open>closed", "closed>open", "open>half-open", "half-open>open"}, changes)
}
