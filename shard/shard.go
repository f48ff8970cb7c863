// Package shard spreads a hot key over several sub-keys, each holding a
// share of the limit, so that one tenant's traffic is not pinned to one
// Redis Cluster shard.
//
// # How it works
//
// For a key the decorator shards (every key, or those chosen with
// [WithHotKeys] or [WithPredicate]), the limit is split into S shares: Rate
// / S and Burst / S, the remainders spread over the first shares so that
// they add up to the limit exactly. Each share lives under its own sub-key
// with a hash tag of its own, chosen so that the S sub-keys fall in evenly
// spaced parts of the 16,384 slots: on a cluster whose slots are spread
// evenly over its primaries (as redis-cli --cluster create does), the
// sub-keys land on min(S, primaries) different primaries.
//
// A request goes to a random sub-key; if that one denies, to one more
// before the request is denied, so that the shares together behave close
// to one bucket. Together they never admit more than the limit; a request
// can be denied while another share still has room, and docs/scaling.md
// gives the measured rate of that under skewed traffic.
//
// # What a Decision means
//
// The Decision is the share's: its Limit is the share's limit and its
// Remaining what that share has left. A denial's RetryAfter is the shorter
// of the two shares' tried (a retry then may be routed to another share).
// A cost larger than one share's capacity (Burst / S, or Rate / S for the
// window algorithms) is an error wrapping [sluice.ErrCostExceedsBurst]:
// shard only keys whose requests are small next to the limit. Each share
// must also be a limit the algorithm accepts: the token bucket and GCRA
// reject a share whose Period / Rate is not within 1% of whole microseconds
// (see tokenbucket.ValidateLimit), so split high rates into shares that
// divide the period.
package shard

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice"
)

// Limiter decorates a [sluice.Limiter], sharding chosen keys. It is safe
// for concurrent use.
type Limiter struct {
	next   sluice.Limiter
	shards int
	hot    func(key string) bool

	subKeys     sync.Map // key -> []string, for up to maxCachedKeys keys
	cachedCount atomic.Int64
}

// maxCachedKeys bounds the sub-key cache; keys beyond it have their
// sub-keys computed on each call (a few CRC16s each).
const maxCachedKeys = 4096

var _ sluice.Limiter = (*Limiter)(nil)

// DefaultShards is the number of sub-keys when [WithShards] is not given.
const DefaultShards = 4

// MaxShards is the most sub-keys a key can be split into.
const MaxShards = 64

// Option configures a [Limiter].
type Option interface{ apply(*Limiter) error }

type optionFunc func(*Limiter) error

func (f optionFunc) apply(l *Limiter) error { return f(l) }

// WithShards sets the number of sub-keys a sharded key is split into
// (default [DefaultShards]).
func WithShards(s int) Option {
	return optionFunc(func(l *Limiter) error {
		if s < 1 || s > MaxShards {
			return fmt.Errorf("shard: WithShards(%d): must be between 1 and %d", s, MaxShards)
		}
		l.shards = s
		return nil
	})
}

// WithHotKeys shards only these keys. The default shards every key.
func WithHotKeys(keys ...string) Option {
	set := make(map[string]bool, len(keys))
	for _, k := range keys {
		set[k] = true
	}
	return WithPredicate(func(key string) bool { return set[key] })
}

// WithPredicate shards the keys for which hot returns true. The default
// shards every key.
func WithPredicate(hot func(key string) bool) Option {
	return optionFunc(func(l *Limiter) error {
		if hot == nil {
			return errors.New("shard: WithPredicate(nil)")
		}
		l.hot = hot
		return nil
	})
}

// New returns a Limiter that shards keys over next. It does no I/O.
func New(next sluice.Limiter, opts ...Option) (*Limiter, error) {
	if next == nil {
		return nil, errors.New("shard: next must not be nil")
	}
	l := &Limiter{next: next, shards: DefaultShards, hot: func(string) bool { return true }}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("shard: nil option")
		}
		if err := o.apply(l); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// AllowN decides n against key's limit: directly for a key that is not
// sharded, through one or two of its shares for one that is.
func (l *Limiter) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	if !l.hot(key) {
		return l.next.AllowN(ctx, key, limit, n)
	}
	if err := sluice.ValidateKey(key); err != nil {
		return sluice.Decision{}, fmt.Errorf("shard: %w", err)
	}
	if err := limit.Validate(); err != nil {
		return sluice.Decision{}, fmt.Errorf("shard: %w", err)
	}
	s := Count(limit, l.shards)
	subKeys := l.subKeysOf(key, s)
	first := rand.IntN(s)
	d, err := l.next.AllowN(ctx, subKeys[first], Share(limit, s, first), n)
	if err != nil || d.Allowed || s == 1 {
		return d, wrap(err)
	}
	second := (first + 1 + rand.IntN(s-1)) % s
	d2, err := l.next.AllowN(ctx, subKeys[second], Share(limit, s, second), n)
	if err != nil || d2.Allowed {
		return d2, wrap(err)
	}
	if d.RetryAfter < d2.RetryAfter {
		return d, nil
	}
	return d2, nil
}

// subKeysOf returns key's s sub-keys, from the cache when it can.
func (l *Limiter) subKeysOf(key string, s int) []string {
	if v, ok := l.subKeys.Load(key); ok {
		if keys := v.([]string); len(keys) == s {
			return keys
		}
	}
	keys := SubKeys(key, s)
	if l.cachedCount.Load() < maxCachedKeys {
		if _, loaded := l.subKeys.Swap(key, keys); !loaded {
			l.cachedCount.Add(1)
		}
	}
	return keys
}

// SubKeys returns the s sub-keys of key (see SubKey).
func SubKeys(key string, s int) []string {
	keys := make([]string, s)
	for i := range keys {
		keys[i] = SubKey(key, i, s)
	}
	return keys
}

func wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("shard: %w", err)
}

// Count is the number of shares limit is split into for a wish of s: at
// most s, and at most Rate and Burst, so that every share is a valid limit.
func Count(limit sluice.Limit, s int) int {
	return int(max(1, min(int64(s), limit.Rate, limit.Burst)))
}

// Share returns share i of limit split s ways: Rate / s and Burst / s, the
// first Rate % s (and Burst % s) shares one more, so the shares add up to
// limit exactly. s must be at most limit.Rate and limit.Burst (see Count).
func Share(limit sluice.Limit, s, i int) sluice.Limit {
	split := func(v int64) int64 {
		share := v / int64(s)
		if int64(i) < v%int64(s) {
			share++
		}
		return share
	}
	return sluice.Limit{Rate: split(limit.Rate), Period: limit.Period, Burst: split(limit.Burst)}
}

// SubKey returns the key of share i of s for key: the key, escaped, in a
// hash tag of its own with the share's number and a salt chosen so that its
// Redis Cluster slot falls in the middle quarter of the i-th of s equal
// parts of the slot range (so that, with primaries owning equal ranges, S
// shares reach min(S, primaries) of them). Sub-keys of different keys never
// collide.
func SubKey(key string, i, s int) string {
	width := 16384 / s
	center := i*width + width/2
	lo, hi := center-width/8, center+width/8+1
	base := "rl:{" + escapeTag(key) + "#" + strconv.Itoa(i) + "."
	for salt := 0; ; salt++ {
		tag := base + strconv.Itoa(salt) + "}"
		// CRC16 spreads evenly, so about 4 × s tries are expected (they
		// are cached); the bound only guards against a degenerate input.
		if slot := sluice.HashSlot(tag); slot >= lo && slot < hi || salt >= 1<<16 {
			return tag
		}
	}
}

// escapeTag escapes what would end or reopen a hash tag, and '#', which
// separates the share's number.
func escapeTag(s string) string {
	if !strings.ContainsAny(s, "%{}#") {
		return s
	}
	r := strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D", "#", "%23")
	return r.Replace(s)
}
