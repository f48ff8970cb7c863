package redistest

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The harness's waits are sized from the timers of Redis that they wait
// on, not from how fast the machine is: a loaded machine (the race
// detector, every package's tests at once, other processes) makes the
// work between two timer ticks slower, but the ticks themselves come on
// time, so a wait that is still seeing things move goes on, and one that
// has seen nothing move for several of the ticks it depends on gives up,
// saying what it saw last.

// patience is how long a wait goes on.
type patience struct {
	// quiet is how long what the wait sees may stay the same: past it,
	// nothing is moving.
	quiet time.Duration
	// limit is how long the wait goes on in all, moving or not.
	limit time.Duration
}

// setupPatience is for a harness's start-up waits (a replica's first
// sync, a cluster's agreement, sentinels' discovery of each other): each
// step is driven by a timer of at most 10 s (a sentinel's INFO period),
// and the slowest, a replica's first sync, waits 5 s
// (repl-diskless-sync-delay) before it starts.
var setupPatience = patience{quiet: 30 * time.Second, limit: 2 * time.Minute}

// await calls check every 20 ms until it reports done. check also says
// what it sees. await gives up, with an error that says what check saw
// last and for how long, once that has stayed the same for p.quiet or
// after p.limit in all.
func await(p patience, check func() (seen string, done bool)) error {
	start := time.Now()
	var last string
	var since time.Time
	for {
		seen, done := check()
		if done {
			return nil
		}
		now := time.Now()
		if since.IsZero() || seen != last {
			last, since = seen, now
		}
		switch {
		case now.Sub(since) > p.quiet:
			return fmt.Errorf("nothing moved for %s (after %s in all): %s",
				now.Sub(since).Round(time.Millisecond), now.Sub(start).Round(time.Millisecond), last)
		case now.Sub(start) > p.limit:
			return fmt.Errorf("not done after %s, still moving: %s (since %s)",
				now.Sub(start).Round(time.Millisecond), last, now.Sub(since).Round(time.Millisecond))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFor calls check every 20 ms until it returns nil, with
// [setupPatience]: check's error says what it sees.
func waitFor(check func() error) error {
	return await(setupPatience, func() (string, bool) {
		err := check()
		if err == nil {
			return "", true
		}
		return err.Error(), false
	})
}

// fields returns the named fields of an INFO reply (name:value lines).
func fields(info string, names ...string) map[string]string {
	out := map[string]string{}
	for line := range strings.SplitSeq(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && slices.Contains(names, k) {
			out[k] = v
		}
	}
	return out
}

// describe writes f's fields in the order of names, as name:value, and
// name:? for a missing one.
func describe(f map[string]string, names ...string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		v, ok := f[n]
		if !ok {
			v = "?"
		}
		parts[i] = n + ":" + v
	}
	return strings.Join(parts, " ")
}
