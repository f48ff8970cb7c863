package lease

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
)

// Option configures a [Limiter].
type Option func(*config) error

type config struct {
	batch, maxBatch int64
	hold            time.Duration
	byTag           bool
	clock           sluice.Clock
	hotKeys         []string
	hotPred         func(string) bool
	hotChosen       bool
}

// WithSize sets B, how many tokens a lease asks for at a time (default
// [DefaultSize]). A busy key's leases grow up to [WithMaxSize].
func WithSize(b int64) Option {
	return func(c *config) error {
		if b < 1 {
			return fmt.Errorf("lease: WithSize(%d): must be at least 1", b)
		}
		c.batch = b
		return nil
	}
}

// WithMaxSize sets how large a busy key's lease may grow (default 8 × B,
// at least B): a process holds fewer than 2 × that many tokens of a key.
// Give B to keep every lease at B, and the tokens held below 2 × B, at the
// cost of decisions waiting for Redis when a process spends more than B
// tokens of one key per round trip.
func WithMaxSize(m int64) Option {
	return func(c *config) error {
		if m < 1 {
			return fmt.Errorf("lease: WithMaxSize(%d): must be at least 1", m)
		}
		c.maxBatch = m
		return nil
	}
}

// WithHashTagGroups makes only keys with the same hash tag share a batch of lease
// requests, from the start. Give it when next runs on a go-redis Ring,
// which runs a batch on the shard of its first key and reports nothing; a
// Redis Cluster is detected without it (its first cross-slot batch is
// refused before it runs).
func WithHashTagGroups() Option {
	return func(c *config) error {
		c.byTag = true
		return nil
	}
}

// WithHold sets how long a lease's tokens may be spent before they are
// released (default [DefaultHold]): whole milliseconds from
// [ext.MinLeaseHold] (10 ms) to [ext.MaxLeaseHold] (1 hour).
// Shorter holds give idle tokens back sooner and cost more releases.
func WithHold(d time.Duration) Option {
	return func(c *config) error {
		if d < ext.MinLeaseHold || d > ext.MaxLeaseHold || d%time.Millisecond != 0 {
			return fmt.Errorf("lease: WithHold(%s): must be whole milliseconds from %s to %s", d, ext.MinLeaseHold, ext.MaxLeaseHold)
		}
		c.hold = d
		return nil
	}
}

// WithClock sets the clock the Limiter measures its leases' deadlines and
// ages by (default the system clock). Its background work waits on the
// runtime's timers, so a test of it moves time with testing/synctest; a
// fake clock alone moves only the decisions' view of time.
func WithClock(clock sluice.Clock) Option {
	return func(c *config) error {
		if clock == nil {
			return errors.New("lease: WithClock(nil): omit the option for the system clock")
		}
		c.clock = clock
		return nil
	}
}

// WithHotKeys leases only the keys given (and those of [WithPredicate], if
// also given), chosen as shard.WithHotKeys chooses them (ext.SelectKeys):
// a key equal to a given one, or whose hash tag is a given key as
// sluice.Key escapes a tag. Every other key is decided by the wrapped
// limiter on each request, as without the decorator. The default leases
// every key. At least one key, none empty.
func WithHotKeys(keys ...string) Option {
	return func(c *config) error {
		if len(keys) == 0 {
			return errors.New("lease: WithHotKeys(): give at least one key, or omit the option to lease every key")
		}
		for i, k := range keys {
			if k == "" {
				return fmt.Errorf("lease: WithHotKeys: key %d is empty", i)
			}
		}
		c.hotChosen = true
		c.hotKeys = append(c.hotKeys, keys...)
		return nil
	}
}

// WithPredicate leases the keys for which hot returns true (and those of
// [WithHotKeys], if also given). hot is called with the key as passed to
// AllowN, on every call. The default leases every key.
func WithPredicate(hot func(key string) bool) Option {
	return func(c *config) error {
		if hot == nil {
			return errors.New("lease: WithPredicate(nil): give a predicate, or omit the option to lease every key")
		}
		c.hotChosen = true
		c.hotPred = hot
		return nil
	}
}
