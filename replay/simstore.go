package replay

import (
	"time"

	"github.com/sluicehq/sluice"
)

// simStore is the state one subject's Go twin keeps, on the replay's
// simulated clock: a sluice.LocalTx whose entries expire by their TTL in
// simulated time, as Redis expires the script's keys. Expired entries are
// swept once the writes since the last sweep reach the live entries, so the
// map holds about the keys active within the longest TTL, whatever the
// length of the log, and is rebuilt when it has shrunk to a quarter of its
// peak (a Go map never shrinks by itself).
type simStore struct {
	entries    map[string]simEntry
	now        int64 // Unix microseconds
	writes     int
	sweepAfter int
	peak       int
	maxPeak    int // the most entries ever held
}

type simEntry struct {
	value   int64
	object  any   // a structured value (Load/Store), nil for an integer
	expires int64 // Unix microseconds; expired once now reaches it
}

const minSweepWrites = 1024

var _ sluice.LocalTx = (*simStore)(nil)

func newSimStore() *simStore {
	return &simStore{entries: make(map[string]simEntry), sweepAfter: minSweepWrites}
}

func (s *simStore) NowMicros() int64 { return s.now }

func (s *simStore) Get(key string) (int64, bool) {
	e, ok := s.entries[key]
	if !ok || e.expires <= s.now || e.object != nil {
		return 0, false
	}
	return e.value, true
}

func (s *simStore) Set(key string, v int64, ttl time.Duration) {
	s.put(key, simEntry{value: v, expires: s.now + ttl.Microseconds()})
}

func (s *simStore) Load(key string) (any, bool) {
	e, ok := s.entries[key]
	if !ok || e.expires <= s.now || e.object == nil {
		return nil, false
	}
	return e.object, true
}

func (s *simStore) Store(key string, v any, ttl time.Duration) {
	s.put(key, simEntry{object: v, expires: s.now + ttl.Microseconds()})
}

func (s *simStore) Del(key string) { delete(s.entries, key) }

func (s *simStore) put(key string, e simEntry) {
	s.entries[key] = e
	s.peak = max(s.peak, len(s.entries))
	s.maxPeak = max(s.maxPeak, s.peak)
	s.writes++
	if s.writes >= s.sweepAfter {
		s.sweep()
	}
}

// sweep drops expired entries.
func (s *simStore) sweep() {
	for k, e := range s.entries {
		if e.expires <= s.now {
			delete(s.entries, k)
		}
	}
	if len(s.entries) < s.peak/4 {
		rebuilt := make(map[string]simEntry, len(s.entries))
		for k, e := range s.entries {
			rebuilt[k] = e
		}
		s.entries = rebuilt
		s.peak = len(rebuilt)
	}
	s.writes = 0
	s.sweepAfter = max(minSweepWrites, len(s.entries))
}
