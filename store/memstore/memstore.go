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
// treated as missing and swept in amortised O(1) time per write, so memory
// tracks active keys only (see [Store.Entries]).
package memstore

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

const (
	shardCount = 64
	// A shard sweeps all its expired entries after as many writes as it
	// held entries at its last sweep (at least minSweepWrites), which is
	// amortised O(1) per write. Besides, every maintainEveryUs some call
	// sweeps the next shard in turn if it has not been swept for
	// sweepIntervalUs, so that a spike is forgotten even in shards that no
	// longer see writes. A sweep that leaves the map under a quarter of its
	// peak size rebuilds it, since Go maps never shrink.
	minSweepWrites  = 128
	sweepIntervalUs = 1_000_000
	maintainEveryUs = 100_000
)

// Store is an in-process [sluice.Store]. The zero value is not usable; call
// [New]. It is safe for concurrent use.
type Store struct {
	clock  sluice.Clock
	seed   maphash.Seed
	shards [shardCount]shard

	lastMaintainUs atomic.Int64
	maintainCursor atomic.Uint32
}

var _ sluice.Store = (*Store)(nil)

type shard struct {
	mu          sync.Mutex
	entries     map[string]entry
	writes      int   // since the last sweep
	sweepAfter  int   // writes between sweeps
	lastSweepUs int64 // time of the last sweep
	peakEntries int   // since the map was last rebuilt
}

type entry struct {
	value       int64
	object      any // a structured value (LocalTx.Store); nil for an integer
	expiresAtUs int64
}

// Option configures a [Store].
type Option func(*config) error

type config struct {
	clock sluice.Clock
}

// WithClock sets the clock that plays the part of Redis TIME and drives
// expiry (default [sluice.SystemClock]). A nil clock is refused: omit the
// option for the system clock.
func WithClock(clock sluice.Clock) Option {
	return func(c *config) error {
		if clock == nil {
			return errors.New("memstore: WithClock(nil): omit the option for the system clock")
		}
		c.clock = clock
		return nil
	}
}

// New returns an empty in-process store, on [sluice.SystemClock] unless
// [WithClock] says otherwise. It fails only on a nil option or an option
// given a value it cannot use.
func New(opts ...Option) (*Store, error) {
	cfg := config{clock: sluice.SystemClock{}}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("memstore: option %d is nil", i)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	s := &Store{clock: cfg.clock, seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].entries = make(map[string]entry)
		s.shards[i].sweepAfter = minSweepWrites
	}
	return s, nil
}

// Run runs script's Go twin atomically with respect to every other Run on
// the keys it names.
func (s *Store) Run(ctx context.Context, script *sluice.Script, keys []string, args []int64) ([]int64, error) {
	if ctx == nil {
		return nil, sluice.ErrNilContext
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	local := script.Local()
	if local == nil {
		return nil, fmt.Errorf("memstore: script %s has no in-process implementation", script.SHA1())
	}
	defer s.maintain()
	// The clock is read under the locks, as Redis reads TIME inside the
	// script: calls on one key see non-decreasing times.
	if len(keys) == 1 {
		sh := s.shardOf(keys[0])
		sh.mu.Lock()
		defer sh.mu.Unlock()
		return local(&tx{store: s, now: s.clock.Now().UnixMicro()}, keys, args)
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
	return local(&tx{store: s, now: s.clock.Now().UnixMicro()}, keys, args)
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

// Object returns the structured value stored at key, and false if it is
// missing, expired or an integer.
func (s *Store) Object(key string) (any, bool) {
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t := tx{store: s, now: s.clock.Now().UnixMicro()}
	return t.Load(key)
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
	if !ok || e.expiresAtUs <= t.now || e.object != nil {
		return 0, false
	}
	return e.value, true
}

func (t *tx) Set(key string, v int64, ttl time.Duration) {
	t.put(key, entry{value: v, expiresAtUs: t.now + ttl.Microseconds()})
}

func (t *tx) Load(key string) (any, bool) {
	e, ok := t.store.shardOf(key).entries[key]
	if !ok || e.expiresAtUs <= t.now || e.object == nil {
		return nil, false
	}
	return e.object, true
}

func (t *tx) Store(key string, v any, ttl time.Duration) {
	t.put(key, entry{object: v, expiresAtUs: t.now + ttl.Microseconds()})
}

func (t *tx) put(key string, e entry) {
	sh := t.store.shardOf(key)
	sh.entries[key] = e
	sh.peakEntries = max(sh.peakEntries, len(sh.entries))
	sh.writes++
	if sh.writes >= sh.sweepAfter {
		sh.sweep(t.now)
	}
}

// maintain sweeps the next shard in turn, at most every maintainEveryUs,
// if it has not been swept for sweepIntervalUs. It runs after a call has
// released its own locks and never waits for a lock.
func (s *Store) maintain() {
	now := s.clock.Now().UnixMicro()
	last := s.lastMaintainUs.Load()
	if now-last < maintainEveryUs || !s.lastMaintainUs.CompareAndSwap(last, now) {
		return
	}
	sh := &s.shards[s.maintainCursor.Add(1)%shardCount]
	if !sh.mu.TryLock() {
		return
	}
	defer sh.mu.Unlock()
	if now-sh.lastSweepUs >= sweepIntervalUs {
		sh.sweep(now)
	}
}

// sweep deletes expired entries, and rebuilds the map when it has shrunk
// below a quarter of its peak.
func (sh *shard) sweep(nowUs int64) {
	for k, e := range sh.entries {
		if e.expiresAtUs <= nowUs {
			delete(sh.entries, k)
		}
	}
	if len(sh.entries) < sh.peakEntries/4 {
		rebuilt := make(map[string]entry, len(sh.entries))
		for k, e := range sh.entries {
			rebuilt[k] = e
		}
		sh.entries = rebuilt
		sh.peakEntries = len(rebuilt)
	}
	sh.writes = 0
	sh.lastSweepUs = nowUs
	sh.sweepAfter = max(minSweepWrites, len(sh.entries))
}

func (t *tx) Del(key string) { delete(t.store.shardOf(key).entries, key) }
