// Package memstore is an in-process [sluice.Store]: it runs each script's Go
// twin ([sluice.Script.Local]) on a sharded map instead of sending Lua to
// Redis.
//
// Use it for single-process services, for tests, and as the state behind
// local fallback limiters. Decisions are exactly those the Lua scripts make
// on Redis (the conformance suite in sluicetest checks it), but they are
// shared only within one process.
//
// Every value carries an expiry like a Redis TTL; expired entries are
// treated as missing and swept in amortised O(1) time, so memory tracks
// active keys only.
package memstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

const (
	shardCount = 64
	// A shard sweeps its expired entries when it reaches twice the size it
	// had after its last sweep (at least minSweepSize): amortised O(1) per
	// write, and at most shardCount × minSweepSize + 2 × live entries held.
	minSweepSize = 128
)

// Store is an in-process [sluice.Store]. The zero value is not usable; call
// [New]. It is safe for concurrent use.
type Store struct {
	clock  sluice.Clock
	seed   maphash.Seed
	shards [shardCount]shard
}

var _ sluice.Store = (*Store)(nil)

type shard struct {
	mu        sync.Mutex
	entries   map[string]entry
	sweepSize int // sweep expired entries when the map reaches this size
}

type entry struct {
	value       int64
	expiresAtUs int64
}

// Option configures a [Store].
type Option interface{ apply(*Store) }

type optionFunc func(*Store)

func (f optionFunc) apply(s *Store) { f(s) }

// WithClock sets the clock that plays the part of Redis TIME and drives
// expiry. The default is [sluice.SystemClock].
func WithClock(clock sluice.Clock) Option {
	return optionFunc(func(s *Store) { s.clock = clock })
}

// New returns an empty in-process store.
func New(opts ...Option) *Store {
	s := &Store{clock: sluice.SystemClock{}, seed: maphash.MakeSeed()}
	for _, o := range opts {
		if o != nil {
			o.apply(s)
		}
	}
	for i := range s.shards {
		s.shards[i].entries = make(map[string]entry)
		s.shards[i].sweepSize = minSweepSize
	}
	return s
}

// Run runs script's Go twin atomically with respect to every other Run on
// the keys it names.
func (s *Store) Run(ctx context.Context, script *sluice.Script, keys []string, args []int64) ([]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	local := script.Local()
	if local == nil {
		return nil, fmt.Errorf("memstore: script %s has no in-process implementation", script.SHA1())
	}
	tx := tx{store: s, now: s.clock.Now().UnixMicro()}
	if len(keys) == 1 {
		sh := s.shardOf(keys[0])
		sh.mu.Lock()
		defer sh.mu.Unlock()
		return local(&tx, keys, args)
	}
	// Several keys: lock their shards in index order, so two scripts with
	// overlapping keys cannot deadlock.
	idx := make([]int, 0, len(keys))
	for _, k := range keys {
		idx = append(idx, s.shardIndex(k))
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	for _, i := range idx {
		s.shards[i].mu.Lock()
	}
	defer func() {
		for _, i := range idx {
			s.shards[i].mu.Unlock()
		}
	}()
	return local(&tx, keys, args)
}

// Len returns the number of live (unexpired) entries, for tests and
// memory accounting.
func (s *Store) Len() int {
	now := s.clock.Now().UnixMicro()
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for _, e := range sh.entries {
			if e.expiresAtUs > now {
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}

// Entries returns the number of entries held, expired or not: what the
// store costs in memory until the next sweep.
func (s *Store) Entries() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.entries)
		sh.mu.Unlock()
	}
	return n
}

// Value returns the integer stored at key, and false if it is missing or
// expired.
func (s *Store) Value(key string) (int64, bool) {
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t := tx{store: s, now: s.clock.Now().UnixMicro()}
	return t.Get(key)
}

// TTL returns the time left before key expires, and false if it is missing.
func (s *Store) TTL(key string) (time.Duration, bool) {
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.clock.Now().UnixMicro()
	e, ok := sh.entries[key]
	if !ok || e.expiresAtUs <= now {
		return 0, false
	}
	return time.Duration(e.expiresAtUs-now) * time.Microsecond, true
}

func (s *Store) shardIndex(key string) int {
	return int(maphash.String(s.seed, key) % shardCount)
}

func (s *Store) shardOf(key string) *shard { return &s.shards[s.shardIndex(key)] }

// tx is the LocalTx lent to a script; its shards are locked by Run.
type tx struct {
	store *Store
	now   int64
}

func (t *tx) NowMicros() int64 { return t.now }

func (t *tx) Get(key string) (int64, bool) {
	e, ok := t.store.shardOf(key).entries[key]
	if !ok || e.expiresAtUs <= t.now {
		return 0, false
	}
	return e.value, true
}

func (t *tx) Set(key string, v int64, ttl time.Duration) {
	sh := t.store.shardOf(key)
	sh.entries[key] = entry{value: v, expiresAtUs: t.now + ttl.Microseconds()}
	if len(sh.entries) >= sh.sweepSize {
		for k, e := range sh.entries {
			if e.expiresAtUs <= t.now {
				delete(sh.entries, k)
			}
		}
		sh.sweepSize = max(minSweepSize, 2*len(sh.entries))
	}
}

func (t *tx) Del(key string) { delete(t.store.shardOf(key).entries, key) }
