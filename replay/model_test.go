package replay

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms"
	"github.com/sluicehq/sluice/replay/accesslog"
)

// The brute-force models below are written from each algorithm's
// definition in its doc.go and script header, not from its Go twin: they
// keep whatever history the definition speaks of (every admitted request
// for the window algorithms) and recompute the decision from it. Each
// decides a request of cost n (already multiplied by the policy's cost)
// for key at now, in Unix microseconds, and says whether it is allowed. A
// cost above what the limit can ever allow falls out of each definition as
// a denial that changes nothing, as the replay decides it.
type bruteModel interface {
	decide(key string, now, n int64) bool
}

// bruteLimit is a limit in the scripts' integer units.
type bruteLimit struct {
	rate, periodUs, burst int64
}

func bruteLimitOf(l sluice.Limit) bruteLimit {
	return bruteLimit{rate: l.Rate, periodUs: l.PeriodMicros(), burst: l.Burst}
}

// interval is one token's refill time (one emission interval): Period /
// Rate rounded up to a whole microsecond, as both bucket docs say.
func (l bruteLimit) interval() int64 { return (l.periodUs + l.rate - 1) / l.rate }

func newBruteModel(name string, l sluice.Limit) bruteModel {
	b := bruteLimitOf(l)
	switch name {
	case "tokenbucket":
		return &bucketModel{bruteLimit: b, keys: map[string]*bucketState{}}
	case "gcra":
		return &gcraModel{bruteLimit: b, tat: map[string]int64{}}
	case "fixedwindow":
		return &windowModel{bruteLimit: b, log: map[string][]admitted{}, estimate: fixedEstimate}
	case "slidingcounter":
		return &windowModel{bruteLimit: b, log: map[string][]admitted{}, estimate: slidingCounterEstimate}
	case "slidinglog":
		return &windowModel{bruteLimit: b, log: map[string][]admitted{}, estimate: slidingLogEstimate}
	}
	panic("no model for " + name)
}

// bucketModel is the token bucket as its doc states it, kept as the
// tokens in the bucket, in microseconds of refill (a token is interval
// microseconds): a new key's bucket is full (burst tokens); the time since
// the key's last request refills it, never past full; a request of cost n
// is allowed when n tokens are in it, and takes them.
type bucketModel struct {
	bruteLimit
	keys map[string]*bucketState
}

type bucketState struct{ credit, last int64 }

func (m *bucketModel) decide(key string, now, n int64) bool {
	full := m.burst * m.interval()
	s := m.keys[key]
	if s == nil {
		s = &bucketState{credit: full, last: now}
		m.keys[key] = s
	}
	s.credit = min(full, s.credit+(now-s.last))
	s.last = now
	if need := n * m.interval(); need <= s.credit {
		s.credit -= need
		return true
	}
	return false
}

// gcraModel is GCRA as its doc states it, in the virtual scheduling form:
// the theoretical arrival time tat of the key's next request (a new key's
// is now); a request of cost n conforms when it would move tat to at most
// burst intervals ahead of now, and then moves it.
type gcraModel struct {
	bruteLimit
	tat map[string]int64
}

func (m *gcraModel) decide(key string, now, n int64) bool {
	tat := max(m.tat[key], now)
	if next := tat + n*m.interval(); next-now <= m.burst*m.interval() {
		m.tat[key] = next
		return true
	}
	return false
}

// admitted is one admitted request of a window model's history.
type admitted struct{ at, cost int64 }

// windowModel keeps every request it admitted per key and allows a
// request of cost n when estimate(history, now, n) says so.
type windowModel struct {
	bruteLimit
	log      map[string][]admitted
	estimate func(l bruteLimit, history []admitted, now, n int64) bool
}

func (m *windowModel) decide(key string, now, n int64) bool {
	h := m.log[key]
	// Requests older than two periods weigh in no window algorithm: drop
	// them so that the history stays short (the check reads it whole).
	for len(h) > 0 && h[0].at <= now-2*m.periodUs {
		h = h[1:]
	}
	ok := m.estimate(m.bruteLimit, h, now, n)
	if ok {
		h = append(h, admitted{at: now, cost: n})
	}
	m.log[key] = h
	return ok
}

// sumIn is the cost admitted in [from, to).
func sumIn(h []admitted, from, to int64) int64 {
	var sum int64
	for _, a := range h {
		if a.at >= from && a.at < to {
			sum += a.cost
		}
	}
	return sum
}

// fixedEstimate: windows [k·P, (k+1)·P) aligned to the Unix epoch each
// allow rate cost units.
func fixedEstimate(l bruteLimit, h []admitted, now, n int64) bool {
	start := now / l.periodUs * l.periodUs
	return sumIn(h, start, start+l.periodUs)+n <= l.rate
}

// slidingCounterEstimate: the previous aligned window's count weighted by
// the share of it still within a period of now, plus the current window's,
// plus n, at most rate; computed as the script computes it in Lua numbers
// (float64), ((prev × (P − elapsed)) / P + cur) + n, each operation
// rounded (the conversions keep Go from fusing any of them).
func slidingCounterEstimate(l bruteLimit, h []admitted, now, n int64) bool {
	start := now / l.periodUs * l.periodUs
	cur := sumIn(h, start, start+l.periodUs)
	prev := sumIn(h, start-l.periodUs, start)
	elapsed := now - start
	weighted := float64(float64(prev)*float64(l.periodUs-elapsed)) / float64(l.periodUs)
	return float64(float64(weighted+float64(cur))+float64(n)) <= float64(l.rate)
}

// slidingLogEstimate: the cost admitted in (now − P, now], plus n, at most
// rate.
func slidingLogEstimate(l bruteLimit, h []admitted, now, n int64) bool {
	var sum int64
	for _, a := range h {
		if a.at > now-l.periodUs && a.at <= now {
			sum += a.cost
		}
	}
	return sum+n <= l.rate
}

// capacityOf is the largest cost limit can ever allow under algorithm:
// the burst for the buckets, the rate for the window algorithms.
func capacityOf(name string, l sluice.Limit) int64 {
	if name == "tokenbucket" || name == "gcra" {
		return l.Burst
	}
	return l.Rate
}

// genLog generates n records for a few keys, in time order from about t0,
// shaped by limit: gaps around the rate's interval and far shorter, equal
// timestamps, bursts of one key, idle gaps longer than the period (so that
// state expires), requests exactly one period (or one microsecond either
// side of it) after the key's previous one and on (or next to) the
// boundaries of epoch-aligned windows, and costs above 1 up to one more
// than the largest capacity the limit has under any algorithm.
func genLog(seed uint64, n int, limit sluice.Limit) []accesslog.Record {
	rng := rand.New(rand.NewPCG(seed, 27))
	period := limit.PeriodMicros()
	step := max(period/limit.Rate, 1)
	maxCost := max(limit.Rate, limit.Burst) + 1
	now := t0.UnixMicro() + rng.Int64N(period) // not on a window boundary
	last := map[string]int64{}
	recs := make([]accesslog.Record, 0, n)
	add := func(key string, cost int64) {
		last[key] = now
		recs = append(recs, accesslog.Record{Time: time.UnixMicro(now).UTC(), Key: key, Method: "GET", Path: "/",
			Cost: cost, Line: int64(len(recs) + 1)})
	}
	cost := func() int64 {
		switch r := rng.IntN(100); {
		case r < 70:
			return 1
		case r < 96:
			return 2 + rng.Int64N(max(maxCost-2, 1))
		default:
			return maxCost // above every capacity but the other's
		}
	}
	for len(recs) < n {
		key := fmt.Sprint("k", rng.IntN(5))
		nudge := rng.Int64N(3) - 1 // -1, 0 or +1 µs
		switch r := rng.IntN(100); {
		case r < 15: // the same microsecond as the previous record
		case r < 50:
			now += rng.Int64N(2*step + 1)
		case r < 70:
			now += rng.Int64N(step/4 + 1)
		case r < 80:
			now += rng.Int64N(period + 1)
		case r < 86: // idle for longer than the period
			now += period + 1 + rng.Int64N(3*period)
		case r < 93: // a period after the key's previous request
			if at, ok := last[key]; ok && at+period+nudge >= now {
				now = at + period + nudge
			}
		default: // on a window boundary
			now = max(now, (now/period+1)*period+nudge)
		}
		if rng.IntN(10) == 0 { // a burst of one key
			for range 2 + rng.IntN(8) {
				if len(recs) == n {
					break
				}
				now += rng.Int64N(2)
				add(key, cost())
			}
			continue
		}
		add(key, cost())
	}
	return recs
}

// modelCase is a limit to replay generated logs under.
type modelCase struct {
	limit sluice.Limit
	cost  int64 // the policy's cost
}

var modelCases = []modelCase{
	{limit: sluice.PerSecond(5).WithBurst(3)},
	{limit: sluice.Limit{Rate: 3, Period: time.Second, Burst: 7}},           // interval 333,334 µs
	{limit: sluice.Limit{Rate: 7, Period: 2 * time.Second, Burst: 4}},       // interval 285,715 µs
	{limit: sluice.PerMinute(100).WithBurst(20)},                            // interval 600,000 µs
	{limit: sluice.PerSecond(1)},                                            // one at a time
	{limit: sluice.Limit{Rate: 10, Period: time.Second, Burst: 6}, cost: 2}, // policy cost multiplies
}

// replayAll replays recs under policy p and every algorithm and returns
// each algorithm's decisions in log order.
func replayAll(t *testing.T, recs []accesslog.Record, p Policy) map[string][]Decision {
	t.Helper()
	var mu sync.Mutex
	got := map[string][]Decision{}
	_, err := Run(context.Background(), &records{recs: recs}, Config{Policies: []Policy{p},
		Observe: func(d Decision) {
			mu.Lock()
			defer mu.Unlock()
			got[d.Algorithm] = append(got[d.Algorithm], d)
		}})
	require.NoError(t, err)
	require.Len(t, got, len(algorithms.Names))
	return got
}

// requireSameDecisions checks that got decided every record of recs, in
// order, as want (called other in messages) did, and reports the first
// disagreement with the line, key, time and cost, and the key's records
// before it.
func requireSameDecisions(t *testing.T, recs []accesslog.Record, policyCost int64, got []Decision, other string, want func(i int, cost int64) bool) {
	t.Helper()
	require.Len(t, got, len(recs))
	for i, rec := range recs {
		d := got[i]
		cost := rec.Cost * max(policyCost, 1)
		require.Equal(t, [3]any{rec.Line, rec.Key, cost}, [3]any{d.Line, d.Key, d.Cost}, "decision %d is of another record", i)
		require.Equal(t, rec.Time, d.Time)
		if w := want(i, cost); w != d.Allowed {
			var before []string
			for j := i - 1; j >= 0 && len(before) < 6; j-- {
				if recs[j].Key == rec.Key {
					before = append(before, fmt.Sprintf("line %d at %d µs cost %d allowed %v",
						recs[j].Line, recs[j].Time.UnixMicro(), recs[j].Cost*max(policyCost, 1), got[j].Allowed))
				}
			}
			t.Fatalf("line %d, key %q, at %s (%d µs), cost %d: replay allowed=%v, %s allowed=%v\nthe key's previous records, latest first:\n  %s",
				rec.Line, rec.Key, rec.Time.Format(time.RFC3339Nano), rec.Time.UnixMicro(), cost, d.Allowed, other, w, strings.Join(before, "\n  "))
		}
	}
}

func TestReplayMatchesBruteForceModels(t *testing.T) {
	for _, c := range modelCases {
		for _, seed := range []uint64{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/cost%d/seed%d", c.limit, max(c.cost, 1), seed), func(t *testing.T) {
				recs := genLog(seed, 2000, c.limit)
				got := replayAll(t, recs, Policy{Name: "p", Limit: c.limit, Cost: c.cost})
				for _, name := range algorithms.Names {
					t.Run(name, func(t *testing.T) {
						model := newBruteModel(name, c.limit)
						capacity := capacityOf(name, c.limit)
						var allowed, denied, over int
						requireSameDecisions(t, recs, c.cost, got[name], "the model", func(i int, cost int64) bool {
							ok := model.decide(recs[i].Key, recs[i].Time.UnixMicro(), cost)
							require.Equal(t, cost > capacity, got[name][i].OverCapacity, "line %d: over capacity", recs[i].Line)
							switch {
							case ok:
								allowed++
							case cost > capacity:
								over++
							default:
								denied++
							}
							return ok
						})
						// The log is worth checking: it has both outcomes,
						// and denials that are not over capacity.
						require.Positive(t, allowed)
						require.Positive(t, denied)
						require.Positive(t, over)
					})
				}
			})
		}
	}
}
