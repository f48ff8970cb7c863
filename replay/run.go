package replay

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
)

// item is one record as every run reads it.
type item struct {
	key      string
	keys     []string // the record's keys, when it has several (Record.Keys)
	now      int64    // Unix microseconds, never earlier than the previous item's
	cost     int64    // the record's cost
	line     int64
	policies uint64 // the policies it is subject to, one bit each
	method   string
	path     string
	route    string
}

// run replays one subject: a policy under one algorithm, at the policy's
// limit and, with a target, at the limits of the ladder.
type run struct {
	sub      subject
	name     string // the policy's
	costs    *costMatcher
	tierOf   func(string) string
	tier     string
	keyIndex int // the record's key that keys the policy (Policy.KeyIndex)
	main     *decider
	ladder   []*decider
	ladLimit []sluice.Limit // the ladder's limits
	periodUs int64
	err      error // the first error of a twin; no decision after it

	keys    map[string]*keyStat
	maxKeys int
	sweepAt int // len(keys) that triggers the next fold
	top     int // how many top keys the report lists
	folded  int64
	// What the keys forgotten while denied count in the report: their
	// denials are final when they are forgotten.
	foldedDenied, foldedWell, foldedWellDenials int64
	foldedLadder                                []int64 // per ladder step
	foldedTop                                   []KeyStat
	peakKeys                                    int
	requests                                    int64
	allowed                                     int64
	denied                                      int64
	over                                        int64
	ladderDen                                   []int64 // denials per ladder step
	worst                                       worstWindow
	subUs                                       int64 // the window ring's slot width
	timeline                                    timeline
	observe                                     func(Decision)
	jobs                                        chan job
	// Estimates of the distinct keys seen, denied, and denied at each
	// ladder step, for when the table forgot keys that came back.
	seen, deniedSeen distinct
	ladderSeen       []distinct
}

// keyStat is what the report needs of one key.
type keyStat struct {
	first, last, requests, cost, denied int64
	ladder                              uint64 // the ladder steps that denied it at least once
	ring                                windowRing
}

const ringSlots = 10

// windowRing counts what one key was admitted in the last ringSlots slots
// of a tenth of a period each.
type windowRing struct {
	head   int64 // the slot of the latest admission, in slot units since the epoch
	counts [ringSlots]int64
	sum    int64
}

// add admits cost at slot and returns what the key was admitted in the
// ringSlots slots ending at slot.
func (w *windowRing) add(slot, cost int64) int64 {
	if steps := slot - w.head; steps > 0 {
		if steps >= ringSlots {
			w.counts, w.sum = [ringSlots]int64{}, 0
		} else {
			for i := int64(1); i <= steps; i++ {
				j := (w.head + i) % ringSlots
				w.sum -= w.counts[j]
				w.counts[j] = 0
			}
		}
		w.head = slot
	}
	w.counts[slot%ringSlots] += cost
	w.sum += cost
	return w.sum
}

// worstWindow is the most one key was admitted in one window.
type worstWindow struct {
	key      string
	start    int64 // Unix microseconds
	admitted int64
}

func newRun(sub subject, p Policy, cfg *Config) *run {
	main, _ := newDecider(sub.algorithm, sub.limit) // checked by Config.check
	costs, _ := newCostMatcher(p)                   // checked by Config.check
	r := &run{sub: sub, name: p.Name, costs: costs, tierOf: p.TierOf, tier: p.Tier, keyIndex: p.KeyIndex, main: main, periodUs: sub.limit.PeriodMicros(),
		keys: map[string]*keyStat{}, maxKeys: cfg.MaxKeys, observe: cfg.Observe, jobs: make(chan job, 4)}
	if r.maxKeys == 0 {
		r.maxKeys = defaultMaxKeys
	}
	r.sweepAt = r.maxKeys
	r.top = topKeys(cfg)
	r.subUs = (r.periodUs + ringSlots - 1) / ringSlots
	if cfg.Target > 0 {
		for _, limit := range ladderLimits(sub.limit) {
			if d, err := newDecider(sub.algorithm, limit); err == nil {
				r.ladder = append(r.ladder, d)
				r.ladLimit = append(r.ladLimit, limit)
			}
		}
		r.ladderDen = make([]int64, len(r.ladder))
		r.foldedLadder = make([]int64, len(r.ladder))
		r.ladderSeen = make([]distinct, len(r.ladder))
	}
	return r
}

// feed decides the items of a batch that are subject to the run's policy
// and not blocked by an earlier one; stops, when not nil, receives which
// it denied.
func (r *run) feed(batch []item, blocked, stops []bool) {
	bit := uint64(1) << r.sub.policy
	for i := range batch {
		it := &batch[i]
		if it.policies&bit == 0 || blocked != nil && blocked[i] || r.err != nil {
			continue
		}
		key := it.key
		if r.keyIndex > 0 {
			if r.keyIndex >= len(it.keys) {
				r.err = fmt.Errorf("replay: policy %q is keyed by the record's key %d, and line %d has %d", r.name, r.keyIndex, it.line, max(len(it.keys), 1))
				continue
			}
			key = it.keys[r.keyIndex]
		}
		if r.tierOf != nil && r.tierOf(key) != r.tier {
			continue
		}
		if allowed := r.decide(it, key); stops != nil && !allowed {
			stops[i] = true
		}
	}
}

// decide decides one item, keyed by key, and reports whether it was
// allowed.
func (r *run) decide(it *item, key string) bool {
	policyCost := r.costs.of(it.method, it.path, it.route)
	cost := it.cost * policyCost
	if it.cost > sluice.MaxBurst/policyCost {
		cost = sluice.MaxBurst + 1 // beyond any capacity, without overflow
	}
	ks := r.keys[key]
	if ks == nil {
		if len(r.keys) >= r.sweepAt {
			r.fold(it.now)
		}
		ks = &keyStat{first: it.now, ring: windowRing{head: it.now / r.subUs}}
		r.keys[key] = ks
		r.peakKeys = max(r.peakKeys, len(r.keys))
		r.seen.add(key)
	}
	ks.last = it.now
	ks.requests++
	ks.cost += cost
	r.requests++
	if r.timeline.step == 0 {
		r.timeline.start, r.timeline.step = it.now, int64(time.Second/time.Microsecond)
	}

	allowed, over, err := r.main.decide(key, it.now, cost)
	if err != nil {
		// The twins fail only on state they did not write or on a limit
		// Config.check refused: a bug, reported as the replay's error.
		r.err = err
		return false
	}
	switch {
	case allowed:
		r.allowed++
		slot := it.now / r.subUs
		if n := ks.ring.add(slot, cost); n > r.worst.admitted {
			r.worst = worstWindow{key: key, start: (slot - ringSlots + 1) * r.subUs, admitted: n}
		}
	default:
		r.denied++
		ks.denied++
		if ks.denied == 1 {
			r.deniedSeen.add(key)
		}
		if over {
			r.over++
		}
	}
	r.timeline.add(it.now, allowed)
	for i, d := range r.ladder {
		if ok, _, err := d.decide(key, it.now, cost); err != nil {
			r.err = err
			return false
		} else if !ok {
			r.ladderDen[i]++
			if ks.ladder&(1<<i) == 0 {
				ks.ladder |= 1 << i
				r.ladderSeen[i].add(key)
			}
		}
	}
	if r.observe != nil {
		r.observe(Decision{Policy: r.name, Algorithm: r.sub.algorithm, Line: it.line, Key: key,
			Time: time.UnixMicro(it.now).UTC(), Cost: cost, Allowed: allowed, OverCapacity: over})
	}
	return allowed
}

// fold forgets the keys idle for more than a period, so that the key
// table stays within MaxKeys plus the keys active within a period. A
// forgotten key's figures are final: a key never denied only counts among
// Keys, a denied one is counted in the report's figures now (denied keys,
// well-behaved keys, the ladder's keys) and kept among the top keys if it
// is one of them. A key seen again starts a new entry.
func (r *run) fold(now int64) {
	for k, ks := range r.keys {
		if now-ks.last <= r.periodUs {
			continue
		}
		if ks.denied > 0 {
			r.foldedDenied++
			well := ks.wellBehaved(r.sub.limit.Rate, r.periodUs)
			if well {
				r.foldedWell++
				r.foldedWellDenials += ks.denied
			}
			r.foldedTop = append(r.foldedTop, KeyStat{Key: k, Requests: ks.requests, Cost: ks.cost, Denied: ks.denied, WellBehaved: well})
		}
		for i := range r.foldedLadder {
			if ks.ladder&(1<<i) != 0 {
				r.foldedLadder[i]++
			}
		}
		delete(r.keys, k)
		r.folded++
	}
	if len(r.foldedTop) > 2*r.top {
		sortKeyStats(r.foldedTop)
		r.foldedTop = slices.Clip(r.foldedTop[:r.top])
	}
	r.sweepAt = max(r.maxKeys, 2*len(r.keys))
	if len(r.keys) < r.maxKeys/4 {
		rebuilt := make(map[string]*keyStat, len(r.keys))
		for k, ks := range r.keys {
			rebuilt[k] = ks
		}
		r.keys = rebuilt
	}
}

// wellBehaved reports whether the key's average rate, its cost over its
// span (first request to last, at least a period), is within rate per
// period: cost / span <= rate / period, exactly.
func (ks *keyStat) wellBehaved(rate, periodUs int64) bool {
	span := max(ks.last-ks.first, periodUs)
	return mulLE(ks.cost, periodUs, rate, span)
}

// timeline counts allowed and denied requests in steps of time that
// double whenever the count of steps would pass maxTimelinePoints.
type timeline struct {
	start, step     int64 // Unix microseconds; microseconds
	allowed, denied []int64
}

const maxTimelinePoints = 400

func (t *timeline) add(now int64, allowed bool) {
	i := (now - t.start) / t.step
	for i >= maxTimelinePoints {
		t.halve()
		i = (now - t.start) / t.step
	}
	for int64(len(t.allowed)) <= i {
		t.allowed, t.denied = append(t.allowed, 0), append(t.denied, 0)
	}
	if allowed {
		t.allowed[i]++
	} else {
		t.denied[i]++
	}
}

// halve merges steps in pairs.
func (t *timeline) halve() {
	for i := 0; i < len(t.allowed); i += 2 {
		a, d := t.allowed[i], t.denied[i]
		if i+1 < len(t.allowed) {
			a, d = a+t.allowed[i+1], d+t.denied[i+1]
		}
		t.allowed[i/2], t.denied[i/2] = a, d
	}
	n := (len(t.allowed) + 1) / 2
	t.allowed, t.denied = t.allowed[:n], t.denied[:n]
	t.step *= 2
}

// The ladder's factors are 2^(k/4) for k in ladderLow..ladderHigh.
const ladderLow, ladderHigh = -16, 16

func ladderFactor(k int) float64 { return math.Pow(2, float64(k)/4) }

// ladderLimits scales limit by each factor of the ladder, in increasing
// order; rate and burst round to the nearest whole number, at least 1.
func ladderLimits(limit sluice.Limit) []sluice.Limit {
	var out []sluice.Limit
	for k := ladderLow; k <= ladderHigh; k++ {
		f := ladderFactor(k)
		l := limit
		l.Rate = max(1, int64(float64(limit.Rate)*f+0.5))
		l.Burst = max(1, int64(float64(limit.Burst)*f+0.5))
		if n := len(out); n > 0 && out[n-1].Rate == l.Rate && out[n-1].Burst == l.Burst {
			continue
		}
		out = append(out, l)
	}
	return out
}
