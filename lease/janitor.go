package lease

import (
	"math"
	"time"
)

// minSweep is the least time between two sweeps: the janitor wakes no
// more often, however many leases end at different times, so a release
// can come up to minSweep after its lease's deadline. That is safe: the
// lease is not spent after its deadline, and the store's reservation
// ends on its own a margin later.
const minSweep = 100 * time.Millisecond

// due is when the janitor must next look at le, on the Limiter's clock:
// its deadline while it reserves tokens, else when it is forgotten (hold
// after its last reset). The caller holds le.mu.
func (le *lease) due(hold time.Duration) int64 {
	if le.reserved > 0 {
		return le.deadline
	}
	return le.resetAt + int64(hold)
}

// schedule makes the janitor wake by at (the Limiter's clock), if it is
// not armed for earlier.
func (l *Limiter) schedule(at int64) {
	for {
		armed := l.armed.Load()
		if at >= armed {
			return
		}
		if l.armed.CompareAndSwap(armed, at) {
			select {
			case l.wake <- struct{}{}:
			default: // a wake is pending already
			}
			return
		}
	}
}

// janitor releases the leases whose deadline passed and forgets the idle
// ones. It arms one timer for the earliest time a lease needs it, at most
// once per minSweep, and none while nothing is leased: an idle Limiter
// does no work.
func (l *Limiter) janitor() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	last := l.now() - int64(minSweep)
	for {
		select {
		case <-l.stop:
			return
		case <-l.wake:
		case <-timer.C:
			l.armed.Store(math.MaxInt64) // sweep schedules what it leaves
			last = l.now()
			l.sweeps.Add(1)
			if rs := l.sweep(last, false); len(rs) > 0 {
				go l.sendReleases(rs) // one goroutine, in batches when it can
			}
		}
		armed := l.armed.Load()
		if armed == math.MaxInt64 {
			timer.Stop()
			continue
		}
		wait := max(armed, last+int64(minSweep)) - l.now()
		timer.Reset(time.Duration(max(wait, 0)))
	}
}

// sweep begins the releases of the leases whose deadline passed and
// forgets those idle for a hold (when all is set, it releases and forgets
// every lease); it schedules the rest. It returns the releases begun, for
// the caller to send (sendReleases): together, so that they go in batches.
//
// A lease released here stays in the map, busy until its release lands,
// and is forgotten by a later sweep: a request for its key meanwhile
// waits for the release, as on the hot path, instead of taking a fresh
// lease whose reservation the release would end.
func (l *Limiter) sweep(now int64, all bool) []release {
	var rs []release
	l.leases.Range(func(k, v any) bool {
		le := v.(*lease)
		le.mu.Lock()
		defer le.mu.Unlock()
		if le.busy != nil || !all && now < le.due(l.hold) {
			l.schedule(le.due(l.hold))
			return true
		}
		if !all && le.reserved > 0 {
			rs = append(rs, l.beginRelease(le))
			l.schedule(le.due(l.hold)) // to forget it, once idle for a hold
			return true
		}
		if l.leases.CompareAndDelete(k, le) {
			le.replaced = true
		}
		if le.reserved > 0 {
			rs = append(rs, l.beginRelease(le))
		}
		return true
	})
	return rs
}
