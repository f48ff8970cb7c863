package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
)

// call is one decision as the harness saw it.
type call struct {
	key      string
	at       time.Duration // since the run started, when the decision returned
	latency  time.Duration
	allowed  bool
	degraded bool // decided by a fallback policy, not by Redis
	err      error
}

// recorder collects calls from many goroutines. Each goroutine records
// into a buffer of its own (local), merged when it is done, so that
// recording costs no lock on the measured path.
type recorder struct {
	start time.Time
	// ping, when set, is called and timed apart before every decision:
	// the same client's round trip, interleaved call by call, so that the
	// two see the same machine (the latency scenario).
	ping  Decide
	mu    sync.Mutex
	calls []call
	pings []time.Duration
}

// localRecorder is one goroutine's buffer.
type localRecorder struct {
	parent *recorder
	calls  []call
	pings  []time.Duration
}

func (r *recorder) local() *localRecorder { return &localRecorder{parent: r} }

func (l *localRecorder) do(ctx context.Context, decide Decide, key string) {
	if ping := l.parent.ping; ping != nil {
		begin := time.Now()
		_, _ = ping(ctx, key)
		l.pings = append(l.pings, time.Since(begin))
	}
	begin := time.Now()
	ok, err := decide(ctx, key)
	end := time.Now()
	degraded := errors.Is(err, errDegraded)
	if degraded {
		err = nil
	}
	l.calls = append(l.calls, call{key: key, at: end.Sub(l.parent.start), latency: end.Sub(begin), allowed: ok && err == nil, degraded: degraded, err: err})
}

// done merges the buffer into the recorder.
func (l *localRecorder) done() {
	l.parent.mu.Lock()
	l.parent.calls = append(l.parent.calls, l.calls...)
	l.parent.pings = append(l.parent.pings, l.pings...)
	l.parent.mu.Unlock()
	l.calls, l.pings = nil, nil
}

// Scenario is one traffic pattern under one limit.
type Scenario struct {
	Name  string
	Limit sluice.Limit
	// Pods is how many instances of the subject the scenario uses; the
	// drive function receives them all.
	Pods int
	// Drive sends the scenario's requests through the pods' decide
	// functions and returns when done.
	Drive func(ctx context.Context, pods []Decide, rec *recorder, d time.Duration)
	// Throughput marks a scenario whose limit admits everything: it
	// measures speed, not accuracy. Baseline subjects run only in these.
	Throughput bool
	// Memory, when positive, is the number of keys the scenario creates:
	// the runner measures used_memory growth per key.
	Memory int
	// InterleavePing sends a PING through the subject's own client before
	// each decision, timed apart, for the subject's latency over PING's.
	InterleavePing bool
	// Subjects, when set, are the scenario's own subjects, run instead of
	// the common ones (Options.Subjects) and filtered by
	// Options.OnlySubjects: the serve scenarios compare subjects that mean
	// nothing elsewhere.
	Subjects []Subject
}

var defaultLimit = sluice.Limit{Rate: 100, Period: time.Second, Burst: 100}

// paced sends rate requests per second for d from one goroutine.
func paced(ctx context.Context, decide Decide, rec *recorder, key string, perSecond float64, d time.Duration) {
	lr := rec.local()
	defer lr.done()
	interval := time.Duration(float64(time.Second) / perSecond)
	deadline := time.Now().Add(d)
	next := time.Now()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		lr.do(ctx, decide, key)
		next = next.Add(interval)
		time.Sleep(time.Until(next))
	}
}

// burst sends n requests at once from 16 goroutines.
func burst(ctx context.Context, decide Decide, rec *recorder, key string, n int) {
	var wg sync.WaitGroup
	per := (n + 15) / 16
	for g := 0; g < 16; g++ {
		wg.Go(func() {
			lr := rec.local()
			defer lr.done()
			for i := 0; i < per && g*per+i < n; i++ {
				lr.do(ctx, decide, key)
			}
		})
	}
	wg.Wait()
}

// Scenarios returns the scenarios, each lasting about d, the serve
// scenarios (with their own subjects) last.
func Scenarios() []Scenario {
	return append([]Scenario{
		{Name: "steady under the limit (80/s against 100/s)", Limit: defaultLimit, Pods: 1,
			Drive: func(ctx context.Context, pods []Decide, rec *recorder, d time.Duration) {
				paced(ctx, pods[0], rec, "steady", 80, d)
			}},
		{Name: "burst after idle (300 at once, then 200/s)", Limit: defaultLimit, Pods: 1,
			Drive: func(ctx context.Context, pods []Decide, rec *recorder, d time.Duration) {
				burst(ctx, pods[0], rec, "burst", 300)
				paced(ctx, pods[0], rec, "burst", 200, d)
			}},
		{Name: "fixed-window boundary attack (Rate just before and after a second)", Limit: defaultLimit, Pods: 1,
			Drive: func(ctx context.Context, pods []Decide, rec *recorder, _ time.Duration) {
				boundary := time.Now().Truncate(time.Second).Add(2 * time.Second)
				time.Sleep(time.Until(boundary.Add(-150 * time.Millisecond)))
				burst(ctx, pods[0], rec, "boundary", 100)
				time.Sleep(time.Until(boundary.Add(5 * time.Millisecond)))
				burst(ctx, pods[0], rec, "boundary", 100)
			}},
		{Name: "pods 4 -> 10 -> 2, each sending 50/s", Limit: defaultLimit, Pods: 10,
			Drive: func(ctx context.Context, pods []Decide, rec *recorder, d time.Duration) {
				for _, n := range []int{4, 10, 2} {
					var wg sync.WaitGroup
					for p := 0; p < n; p++ {
						wg.Go(func() { paced(ctx, pods[p], rec, "pods", 50, d/3) })
					}
					wg.Wait()
				}
			}},
		{Name: "skewed tenants (4 hot keys at 300/s, 40 cold at 2/s)", Limit: defaultLimit, Pods: 1,
			Drive: func(ctx context.Context, pods []Decide, rec *recorder, d time.Duration) {
				var wg sync.WaitGroup
				for k := range 4 {
					for range 3 { // 3 senders at 100/s each
						wg.Go(func() { paced(ctx, pods[0], rec, fmt.Sprintf("hot%d", k), 100, d) })
					}
				}
				for k := range 40 {
					wg.Go(func() { paced(ctx, pods[0], rec, fmt.Sprintf("cold%d", k), 2, d) })
				}
				wg.Wait()
			}},
		{Name: "throughput: one hot key, 128 goroutines, all allowed", Limit: throughputLimit, Pods: 1, Throughput: true,
			Drive: func(ctx context.Context, pods []Decide, rec *recorder, d time.Duration) {
				hammer(ctx, pods[0], rec, d, 128, 1)
			}},
		{Name: "throughput: 10,000 keys, 128 goroutines, all allowed", Limit: throughputLimit, Pods: 1, Throughput: true,
			Drive: func(ctx context.Context, pods []Decide, rec *recorder, d time.Duration) {
				hammer(ctx, pods[0], rec, d, 128, 10_000)
			}},
		{Name: "latency: one caller, one key", Limit: throughputLimit, Pods: 1, Throughput: true, InterleavePing: true,
			Drive: func(ctx context.Context, pods []Decide, rec *recorder, d time.Duration) {
				hammer(ctx, pods[0], rec, d, 1, 1)
			}},
		{Name: "memory: one decision on each of 100,000 keys", Limit: memoryLimit, Pods: 1, Memory: memoryKeys,
			Drive: func(ctx context.Context, pods []Decide, rec *recorder, _ time.Duration) {
				var wg sync.WaitGroup
				for g := range 16 {
					wg.Go(func() {
						lr := rec.local()
						defer lr.done()
						for i := g; i < memoryKeys; i += 16 {
							lr.do(ctx, pods[0], sluice.Key(fmt.Sprintf("tenant%06d", i)))
						}
					})
				}
				wg.Wait()
			}},
	}, ServeScenarios()...)
}

// memoryKeys is how many keys the memory scenario creates: enough that the
// server's fixed costs (its hash table's growth steps, the cached scripts)
// weigh little per key, as in the issue's "INFO memory delta over 100,000
// keys".
const memoryKeys = 100_000

// memoryLimit keeps every subject's keys alive (their TTLs run to seconds
// or an hour) while the memory scenario creates and measures them: with a
// per-second limit, keys of the first seconds expire before the end.
var memoryLimit = sluice.Limit{Rate: 100, Period: time.Hour, Burst: 100}

// throughputLimit admits everything: the throughput scenarios measure
// speed, not accuracy. (The sliding log rejects it: its rate is capped.)
var throughputLimit = sluice.Limit{Rate: 1_000_000, Period: time.Second, Burst: 1_000_000_000}

// hammer calls decide from goroutines for d, cycling over keys.
func hammer(ctx context.Context, decide Decide, rec *recorder, d time.Duration, goroutines, keys int) {
	names := make([]string, keys)
	for i := range names {
		names[i] = sluice.Key(fmt.Sprintf("tenant%06d", i))
	}
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			lr := rec.local()
			defer lr.done()
			for i := g; time.Now().Before(deadline) && ctx.Err() == nil; i += goroutines {
				lr.do(ctx, decide, names[i%keys])
			}
		})
	}
	wg.Wait()
}

// Options says how to run.
type Options struct {
	Duration  time.Duration
	Scenarios []Scenario
	Subjects  []Subject
	Clients   Clients
	// Stats, when set, reads and resets INFO commandstats (a real
	// server); nil on the embedded store.
	Stats    *redis.Client
	Progress io.Writer
	// OnlySubjects filters scenarios' own subjects as --subjects does
	// (see MatchesAny); empty: all of them.
	OnlySubjects string
	// Rounds splits each throughput scenario's Duration into this many
	// rounds, each running every subject once in turn, so that a machine
	// that slows down or speeds up during the run weighs on every subject
	// alike (see mergeRounds); 0 or 1: one round.
	Rounds int
}

// roundsOf is how many rounds sc runs in.
func (o Options) roundsOf(sc Scenario) int {
	if sc.Throughput && sc.Memory == 0 && o.Rounds > 1 {
		return o.Rounds
	}
	return 1
}

// runnable returns the subjects sc runs, baselines only where it measures
// throughput.
func (o Options) runnable(sc Scenario) []Subject {
	var subs []Subject
	for _, sub := range o.subjectsOf(sc) {
		if !sub.Baseline || sc.Throughput {
			subs = append(subs, sub)
		}
	}
	return subs
}

// MatchesAny reports whether name contains one of the comma-separated
// parts of filter; an empty filter matches every name.
func MatchesAny(name, filter string) bool {
	for part := range strings.SplitSeq(filter, ",") {
		if strings.Contains(name, part) {
			return true
		}
	}
	return false
}

// subjectsOf returns the subjects sc runs against.
func (o Options) subjectsOf(sc Scenario) []Subject {
	if sc.Subjects == nil {
		return o.Subjects
	}
	var subs []Subject
	for _, s := range sc.Subjects {
		if MatchesAny(s.Name, o.OnlySubjects) {
			subs = append(subs, s)
		}
	}
	return subs
}

// Planned returns how many runs (a subject in a scenario, in one round)
// Run would make.
func Planned(o Options) int {
	n := 0
	for _, sc := range o.Scenarios {
		n += len(o.runnable(sc)) * o.roundsOf(sc)
	}
	return n
}

// Run runs every scenario against every subject and returns the results.
//
// Progress gets a line per run, with the time left estimated from the
// runs so far.
func Run(ctx context.Context, o Options) []Result {
	var results []Result
	planned, done := Planned(o), 0
	began := time.Now()
	for _, sc := range o.Scenarios {
		subs := o.runnable(sc)
		rounds := o.roundsOf(sc)
		perRound := o
		perRound.Duration = o.Duration / time.Duration(rounds)
		byRound := make([][]Result, len(subs))
		for r := range rounds {
			for i, sub := range subs {
				if o.Progress != nil {
					name := sc.Name
					if rounds > 1 {
						name = fmt.Sprintf("%s, round %d/%d", sc.Name, r+1, rounds)
					}
					fmt.Fprintf(o.Progress, "[%d/%d] %-58.58s  %-40.40s  %s\n", done+1, planned, name, sub.Name, timeLeft(began, done, planned, perRound.Duration))
				}
				byRound[i] = append(byRound[i], runOne(ctx, perRound, sc, sub))
				done++
			}
		}
		first := len(results)
		for i := range subs {
			results = append(results, mergeRounds(byRound[i]))
		}
		overheads(results[first:], subs)
	}
	return results
}

// timeLeft estimates the time the runs not done yet will take: the mean
// of the runs done so far, or the duration per run before the first.
func timeLeft(began time.Time, done, planned int, perRun time.Duration) string {
	if done > 0 {
		perRun = time.Since(began) / time.Duration(done)
	}
	left := (perRun * time.Duration(planned-done)).Round(time.Second)
	return "about " + left.String() + " left"
}

// QuickScenarios and QuickSubjects are what `sluice bench` runs without
// --full: enough for the headline comparison (HeadlineOf) in well under
// 90 s on two cores.
var (
	QuickScenarios = []string{
		"burst after idle (300 at once, then 200/s)",
		"throughput: one hot key, 128 goroutines, all allowed",
		"throughput: 10,000 keys, 128 goroutines, all allowed",
	}
	QuickSubjects = []string{
		"sluice/tokenbucket", "sluice/tokenbucket+coalesce", "sluice/tokenbucket+lease(B=100)",
		"go-redis/redis_rate (GCRA)", "ulule/limiter (fixed window)", "x/time/rate (in process)",
	}
)

// overheads sets the Overhead of each result whose subject is measured
// over another (Subject.Over) that ran in the same scenario, both without
// error.
func overheads(results []Result, subs []Subject) {
	over := map[string]string{}
	for _, s := range subs {
		if s.Over != "" {
			over[s.Name] = s.Over
		}
	}
	byName := map[string]*Result{}
	for i := range results {
		byName[results[i].Subject] = &results[i]
	}
	for i := range results {
		r := &results[i]
		ref := byName[over[r.Subject]]
		if ref == nil || r.Error != "" || ref.Error != "" || r.DecisionsPerSecond <= 0 || ref.DecisionsPerSecond <= 0 {
			continue
		}
		r.Overhead = &Overhead{
			Over:              ref.Subject,
			P50Micros:         r.LatencyMicros.P50 - ref.LatencyMicros.P50,
			MicrosPerDecision: 1e6/r.DecisionsPerSecond - 1e6/ref.DecisionsPerSecond,
		}
	}
}

func runOne(ctx context.Context, o Options, sc Scenario, sub Subject) Result {
	res := Result{Scenario: sc.Name, Subject: sub.Name, Limit: sc.Limit.String(), RedisCallsPerDecision: -1, ServerMicrosPerDecision: -1}
	// Each subject starts on a collected heap: the calls the previous one
	// recorded (hundreds of thousands in a throughput scenario) are garbage,
	// and collecting them during this subject's run would be charged to it.
	runtime.GC()
	if err := o.Clients.GoRedis.FlushAll(ctx).Err(); err != nil {
		res.Error = "flush: " + err.Error()
		return res
	}
	pods := make([]Decide, sc.Pods)
	for i := range pods {
		decide, closeFn, err := sub.New(o.Clients, sc.Limit)
		if err != nil {
			res.Error = err.Error()
			return res
		}
		defer closeFn()
		pods[i] = decide
	}
	if o.Stats != nil {
		_ = o.Stats.ConfigResetStat(ctx).Err()
	}
	memBefore := usedMemory(ctx, o.Stats)
	rec := &recorder{start: time.Now()}
	if sc.InterleavePing && sub.Ping != nil {
		rec.ping = sub.Ping(o.Clients)
	}
	sc.Drive(ctx, pods, rec, o.Duration)
	elapsed := time.Since(rec.start)
	if sc.Memory > 0 && sub.Remote && memBefore > 0 {
		if after := usedMemory(ctx, o.Stats); after > memBefore {
			res.MemoryPerKey = float64(after-memBefore) / float64(sc.Memory)
		}
	}
	if o.Stats != nil && sub.Remote {
		calls, usec, err := commandStats(ctx, o.Stats, rec.ping != nil)
		if err == nil && len(rec.calls) > 0 {
			res.RedisCallsPerDecision = float64(calls) / float64(len(rec.calls))
			res.ServerMicrosPerDecision = float64(usec) / float64(len(rec.calls))
		}
	}
	summarise(&res, rec.calls, sc, elapsed)
	if len(rec.pings) > 0 {
		l := percentiles(rec.pings)
		res.PingLatencyMicros = &l
	}
	return res
}

// usedMemory is INFO memory's used_memory minus the clients' buffers, or
// 0 when it cannot be read.
func usedMemory(ctx context.Context, c *redis.Client) int64 {
	if c == nil {
		return 0
	}
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return 0
	}
	var used, clients int64
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "used_memory":
			used = n
		case "mem_clients_normal":
			clients = n
		}
	}
	return used - clients
}

// commandStats sums calls and usec over every command but the harness's
// own (INFO, CONFIG, FLUSHALL).
func commandStats(ctx context.Context, c *redis.Client, skipPing bool) (calls, usec int64, err error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		switch cmd := strings.TrimPrefix(name, "cmdstat_"); {
		case cmd == "info", cmd == "config|resetstat", cmd == "config", cmd == "flushall":
			continue
		case cmd == "ping" && skipPing: // interleaved PINGs are not the subject's
			continue
		}
		for _, f := range strings.Split(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				calls += int64(n)
			case "usec":
				usec += int64(n)
			}
		}
	}
	return calls, usec, nil
}

// percentiles returns the p50, p99 and p99.9 of latencies (which it sorts),
// in microseconds.
func percentiles(latencies []time.Duration) Latency {
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		if len(latencies) == 0 {
			return 0
		}
		return float64(latencies[min(len(latencies)-1, int(p*float64(len(latencies))))].Nanoseconds()) / 1000
	}
	return Latency{P50: pct(0.50), P99: pct(0.99), P999: pct(0.999)}
}

func summarise(res *Result, calls []call, sc Scenario, elapsed time.Duration) {
	slices.SortFunc(calls, func(a, b call) int { return int(a.at - b.at) })
	res.Requests = int64(len(calls))
	var admitted []time.Duration
	var latencies []time.Duration
	for _, c := range calls {
		latencies = append(latencies, c.latency)
		if c.allowed {
			admitted = append(admitted, c.at)
		}
		if c.err != nil && res.Error == "" {
			res.Error = c.err.Error()
		}
		if c.degraded {
			res.Degraded++
		}
	}
	if res.Degraded > 0 && res.Error == "" {
		res.Error = fmt.Sprintf("%d of %d decisions made by the fallback policy, not by Redis (the store missed its time budget): these figures are not Redis's",
			res.Degraded, res.Requests)
	}
	res.Admitted = int64(len(admitted))
	// The ideal, per key: no more than was asked, and no more than
	// Burst + Rate × T, T the span of the key's requests (an upper bound:
	// a bucket idle for long holds no more than Burst).
	ideal := func(upTo int, t time.Duration) int64 {
		cap := float64(sc.Limit.Burst) + float64(sc.Limit.Rate)*t.Seconds()/sc.Limit.Period.Seconds()
		return min(int64(upTo), int64(math.Floor(cap)))
	}
	perKey := map[string][]call{}
	for _, c := range calls {
		perKey[c.key] = append(perKey[c.key], c)
	}
	worst := 0
	for _, kc := range perKey {
		res.Ideal += ideal(len(kc), kc[len(kc)-1].at-kc[0].at+kc[0].latency)
		// Worst window: the most one key admitted within one Period.
		j := 0
		var times []time.Duration
		for _, c := range kc {
			if c.allowed {
				times = append(times, c.at)
			}
		}
		for i := range times {
			for times[i]-times[j] >= sc.Limit.Period {
				j++
			}
			worst = max(worst, i-j+1)
		}
	}
	res.WorstWindow = float64(worst) / float64(sc.Limit.Rate)
	// Decisions per second over the span of the decisions themselves
	// (from the run's start to the last decision), not counting the
	// recorder's own merging afterwards.
	if len(calls) > 0 && calls[len(calls)-1].at > 0 {
		res.DecisionsPerSecond = float64(len(calls)) / calls[len(calls)-1].at.Seconds()
	} else if elapsed > 0 {
		res.DecisionsPerSecond = float64(len(calls)) / elapsed.Seconds()
	}
	res.LatencyMicros = percentiles(latencies)
	// Over time, in tenths.
	if len(calls) > 0 {
		end := calls[len(calls)-1].at
		for k := 1; k <= 10; k++ {
			t := end * time.Duration(k) / 10
			n, asked := 0, 0
			for _, a := range admitted {
				if a <= t {
					n++
				}
			}
			for _, c := range calls {
				if c.at <= t {
					asked++
				}
			}
			res.AdmittedOverTime = append(res.AdmittedOverTime, int64(n))
			if len(perKey) == 1 {
				res.IdealOverTime = append(res.IdealOverTime, ideal(asked, t))
			} else { // many keys: the ideal curve is what was asked
				res.IdealOverTime = append(res.IdealOverTime, int64(asked))
			}
		}
	}
}
