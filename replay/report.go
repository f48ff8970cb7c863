package replay

import (
	"cmp"
	"math/bits"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/replay/accesslog"
)

// Report is what a replay found, per policy and algorithm. Its JSON form
// is `sluice replay --json`.
type Report struct {
	Input   Input    `json:"input"`
	Target  float64  `json:"target,omitempty"` // Config.Target
	Results []Result `json:"results"`
}

// Input describes the log replayed.
type Input struct {
	Format  string `json:"format,omitempty"`
	Records int64  `json:"records"` // records read (skipped lines are not records)
	// Skipped counts the lines that could not be used (unparsable, or a
	// time outside 1970-2099); SkippedLines lists the first of them.
	Skipped      int64                 `json:"skipped"`
	SkippedLines []accesslog.LineError `json:"skipped_lines,omitempty"`
	OutOfOrder   int64                 `json:"out_of_order"` // decided at the latest time seen before them
	Unmatched    int64                 `json:"unmatched"`    // subject to no policy
	// Stopped counts the records an enforced policy denied (under its
	// own algorithm) before a later policy could decide them.
	Stopped int64     `json:"stopped,omitempty"`
	First   time.Time `json:"first"`
	Last    time.Time `json:"last"`
}

const maxSkippedLines = 100

func (in *Input) addSkipped(e accesslog.LineError) {
	in.Skipped++
	if len(in.SkippedLines) < maxSkippedLines {
		in.SkippedLines = append(in.SkippedLines, e)
	}
}

// Limit is a sluice.Limit as the report shows it.
type Limit struct {
	Rate   int64  `json:"rate"`
	Period string `json:"period"`
	Burst  int64  `json:"burst"`
}

func limitOf(l sluice.Limit) Limit {
	return Limit{Rate: l.Rate, Period: l.Period.String(), Burst: l.Burst}
}

// Result is one policy replayed under one algorithm.
type Result struct {
	Policy    string `json:"policy"`
	Algorithm string `json:"algorithm"`
	// Own: the policy's own algorithm; otherwise an alternative at the
	// same limit.
	Own   bool  `json:"own"`
	Limit Limit `json:"limit"`

	Requests int64 `json:"requests"`
	Allowed  int64 `json:"allowed"`
	Denied   int64 `json:"denied"`
	// OverCapacity counts the denied requests whose cost exceeds what the
	// limit can ever allow.
	OverCapacity int64 `json:"over_capacity,omitempty"`

	// Keys counts the distinct keys seen, DeniedKeys those denied at
	// least once: exact when no key was dropped, estimates otherwise
	// (Estimated).
	Keys       int64 `json:"keys"`
	DeniedKeys int64 `json:"denied_keys"`
	// WellBehavedKeys are the denied keys whose average rate stayed
	// within the limit's rate: their cost over their span in the log
	// (from their first request to their last, at least one period),
	// bursty clients that never exceeded the limit on average.
	// WellBehavedDenials are their denials. The span is the key's own,
	// not the whole log's: over a day, a client that scraped at twice the
	// rate for an hour averages well under it.
	WellBehavedKeys    int64 `json:"well_behaved_keys"`
	WellBehavedDenials int64 `json:"well_behaved_denials"`
	// DroppedKeys were forgotten to keep within Config.MaxKeys, once
	// idle for a period, their figures final: a key seen again after it
	// was forgotten starts a new entry, so its requests are split between
	// its two entries in the top keys and the well-behaved figures.
	DroppedKeys int64 `json:"dropped_keys,omitempty"`
	// PeakKeys is the most keys the report's table held at once, and
	// PeakStateKeys the most keys the limiter's state held: what the
	// replay's memory grew with.
	PeakKeys int64 `json:"peak_keys"`
	// Estimated: keys were dropped, so Keys, DeniedKeys and the ladder's
	// denied keys are estimates of the distinct keys (a HyperLogLog,
	// about 0.8% standard error), which a key seen again after it was
	// dropped does not inflate; the other per-key figures may count it
	// twice.
	Estimated     bool  `json:"estimated,omitempty"`
	PeakStateKeys int64 `json:"peak_state_keys"`

	Worst    Worst      `json:"worst_window"`
	TopKeys  []KeyStat  `json:"top_keys"`
	Timeline Timeline   `json:"timeline"`
	Target   *TargetFit `json:"target,omitempty"`
}

// Worst is the most one key was admitted within one period, over windows
// starting every tenth of a period, against the limit's rate. A token
// bucket admits up to Burst + Rate in a period (a full bucket, then its
// refill); a window algorithm Rate, or twice that across a fixed window's
// boundary.
type Worst struct {
	Key      string    `json:"key,omitempty"`
	Start    time.Time `json:"start"`
	Admitted int64     `json:"admitted"`
	Rate     int64     `json:"rate"`
}

// KeyStat is one key's figures.
type KeyStat struct {
	Key         string `json:"key"`
	Requests    int64  `json:"requests"`
	Cost        int64  `json:"cost"`
	Denied      int64  `json:"denied"`
	WellBehaved bool   `json:"well_behaved"`
}

// Timeline counts the requests allowed and denied in consecutive steps
// of time from Start.
type Timeline struct {
	Start   time.Time     `json:"start"`
	Step    time.Duration `json:"step_ns"`
	Allowed []int64       `json:"allowed"`
	Denied  []int64       `json:"denied"`
}

// TargetFit is the smallest limit of the ladder (a sixteenth to sixteen
// times the policy's, in steps of 2^(1/4)) at which at most Config.Target
// of the keys were ever denied; Limit is nil when none was.
type TargetFit struct {
	Limit          *Limit       `json:"limit"`
	DeniedKeyShare float64      `json:"denied_key_share"`
	Ladder         []LadderStep `json:"ladder"`
}

// LadderStep is one limit of the ladder.
type LadderStep struct {
	Limit      Limit `json:"limit"`
	DeniedKeys int64 `json:"denied_keys"`
	Denied     int64 `json:"denied"`
}

func newReport(in Input, runs []*run, cfg *Config) *Report {
	slices.SortFunc(in.SkippedLines, func(a, b accesslog.LineError) int { return cmp.Compare(a.Line, b.Line) })
	if len(in.SkippedLines) > maxSkippedLines {
		in.SkippedLines = in.SkippedLines[:maxSkippedLines]
	}
	rep := &Report{Input: in, Target: cfg.Target}
	top := topKeys(cfg)
	for _, r := range runs {
		rep.Results = append(rep.Results, r.result(in.First.UnixMicro(), top, cfg.Target))
	}
	return rep
}

func (r *run) result(firstUs int64, top int, target float64) Result {
	res := Result{
		Policy: r.name, Algorithm: r.sub.algorithm, Own: r.sub.own, Limit: limitOf(r.sub.limit),
		Requests: r.requests, Allowed: r.allowed, Denied: r.denied, OverCapacity: r.over,
		Keys: int64(len(r.keys)) + r.folded, DroppedKeys: r.folded,
		PeakKeys: int64(r.peakKeys), PeakStateKeys: int64(r.main.store.maxPeak),
		Worst: Worst{Key: r.worst.key, Admitted: r.worst.admitted, Rate: r.sub.limit.Rate},
		Timeline: Timeline{Allowed: r.timeline.allowed, Denied: r.timeline.denied,
			Step: time.Duration(r.timeline.step) * time.Microsecond},
	}
	if r.worst.admitted > 0 {
		// A window reaching back before the log started starts with it.
		res.Worst.Start = time.UnixMicro(max(r.worst.start, firstUs)).UTC()
	}
	if r.timeline.step > 0 {
		res.Timeline.Start = time.UnixMicro(r.timeline.start).UTC()
	}
	res.DeniedKeys, res.WellBehavedKeys, res.WellBehavedDenials = r.foldedDenied, r.foldedWell, r.foldedWellDenials
	denied := slices.Clone(r.foldedTop)
	ladderKeys := slices.Clone(r.foldedLadder)
	for k, ks := range r.keys {
		for i := range r.ladder {
			if ks.ladder&(1<<i) != 0 {
				ladderKeys[i]++
			}
		}
		if ks.denied == 0 {
			continue
		}
		res.DeniedKeys++
		well := ks.wellBehaved(r.sub.limit.Rate, r.periodUs)
		if well {
			res.WellBehavedKeys++
			res.WellBehavedDenials += ks.denied
		}
		denied = append(denied, KeyStat{Key: k, Requests: ks.requests, Cost: ks.cost, Denied: ks.denied, WellBehaved: well})
	}
	sortKeyStats(denied)
	res.TopKeys = append([]KeyStat{}, denied[:min(top, len(denied))]...)
	if r.folded > 0 {
		res.Estimated = true
		res.Keys, res.DeniedKeys = r.seen.estimate(), r.deniedSeen.estimate()
		for i := range ladderKeys {
			ladderKeys[i] = r.ladderSeen[i].estimate()
		}
	}
	if target > 0 {
		res.Target = r.fit(target, res.Keys, ladderKeys)
	}
	return res
}

// fit finds the smallest ladder limit that denied at most target of keys.
func (r *run) fit(target float64, keys int64, ladderKeys []int64) *TargetFit {
	fit := &TargetFit{}
	for i, l := range r.ladLimit {
		fit.Ladder = append(fit.Ladder, LadderStep{Limit: limitOf(l), DeniedKeys: ladderKeys[i], Denied: r.ladderDen[i]})
	}
	if keys == 0 {
		return fit
	}
	for i := range fit.Ladder {
		if share := float64(ladderKeys[i]) / float64(keys); share <= target {
			l := fit.Ladder[i].Limit
			fit.Limit, fit.DeniedKeyShare = &l, share
			break
		}
	}
	return fit
}

// topKeys is how many keys a result lists.
func topKeys(cfg *Config) int {
	switch {
	case cfg.TopKeys == 0:
		return defaultTopKeys
	case cfg.TopKeys < 0:
		return 0
	}
	return cfg.TopKeys
}

// sortKeyStats sorts keys by denials, most first, then by key.
func sortKeyStats(ks []KeyStat) {
	slices.SortFunc(ks, func(a, b KeyStat) int {
		return cmp.Or(cmp.Compare(b.Denied, a.Denied), cmp.Compare(a.Key, b.Key))
	})
}

// mulLE reports whether a×b <= c×d for non-negative a, b, c, d, in 128
// bits.
func mulLE(a, b, c, d int64) bool {
	hi1, lo1 := bits.Mul64(uint64(a), uint64(b))
	hi2, lo2 := bits.Mul64(uint64(c), uint64(d))
	return hi1 < hi2 || hi1 == hi2 && lo1 <= lo2
}
