package builtins

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/lease"
)

// Load is a multi-process load on one key of a real redis-server.
type Load struct {
	Algorithm  string // a name from Algorithms
	Backend    string // "go-redis" or "rueidis"
	Addr       string // the redis-server
	Key        string
	Limit      sluice.Limit
	Processes  int
	Goroutines int // per process
	Duration   time.Duration
	// LeaseBatch, when positive, puts a lease.Limiter with this batch size
	// in front of the algorithm in every process.
	LeaseBatch int64
	// LeaseHold, when positive, is the lease limiters' hold (lease.WithHold).
	LeaseHold time.Duration
	// Dead is how many of the processes exit without closing their lease
	// limiter, as a crashed pod would: the tokens they hold are lost.
	Dead int
	// Light and Idle shape the load before its Duration at full speed:
	// for Light each goroutine makes one call every LightEvery (light
	// traffic, which leaves leases holding tokens), then for Idle none.
	// This is the spike after idle that leases must survive.
	Light, Idle, LightEvery time.Duration
	// Stack, when not empty, names decorators of [Decorators] to wrap
	// around the limiter in every process, outermost first, as [Stack]
	// builds them (outside the LeaseBatch lease, if any). Processes past
	// Dead close them when the load ends.
	Stack []string
}

// Call is one AllowN of a load: when it started and ended on the shared
// wall clock (Unix nanoseconds), and whether it was allowed. The script
// decided at some instant in [Start, End] of the Redis server's clock,
// which on the same host is the same clock.
type Call struct {
	Start, End int64
	Allowed    bool
}

// loadJob is the job RunLoad runs in each process.
const loadJob = "sluicetest/load"

func init() { RegisterJob(loadJob, runLoad) }

// RunLoad starts load.Processes copies of the test binary (with [RunJob]),
// each running load.Goroutines goroutines that call AllowN(key, limit, 1)
// (lightly for load.Light, then not for load.Idle, then as fast as they
// can for load.Duration), and returns every call of every process, by
// start.
// The package's TestMain must call [Main].
func RunLoad(t *testing.T, load Load) []Call {
	t.Helper()
	var calls []Call
	for p, out := range RunJob(t, loadJob, load.Processes, load) {
		mine, err := parseCalls(out)
		if err != nil {
			t.Fatalf("load process %d: %v", p, err)
		}
		calls = append(calls, mine...)
	}
	sort.Slice(calls, func(i, j int) bool { return calls[i].Start < calls[j].Start })
	return calls
}

// runLoad is one load process: it runs the load and writes its calls, a
// line each.
func runLoad(index int, spec []byte, out io.Writer) error {
	var load Load
	if err := json.Unmarshal(spec, &load); err != nil {
		return fmt.Errorf("load spec: %w", err)
	}
	store, closeStore, err := OpenStore(load.Backend, []string{load.Addr}, load.Goroutines)
	if err != nil {
		return err
	}
	defer closeStore()
	a, ok := Algorithm(load.Algorithm)
	if !ok {
		return fmt.Errorf("no algorithm %q", load.Algorithm)
	}
	alg, err := a.New(store, nil)
	if err != nil {
		return err
	}
	var l sluice.Limiter = alg
	if load.LeaseBatch > 0 {
		opts := []lease.Option{lease.WithSize(load.LeaseBatch)}
		if load.LeaseHold > 0 {
			opts = append(opts, lease.WithHold(load.LeaseHold))
		}
		leased, err := lease.New(alg, opts...)
		if err != nil {
			return err
		}
		if index >= load.Dead {
			defer leased.Close() // a live pod gives back what it holds
		}
		l = leased
	}
	if len(load.Stack) > 0 {
		stacked, closeStack, err := Stack(l, load.Stack...)
		if err != nil {
			return err
		}
		if index >= load.Dead {
			defer closeStack()
		}
		l = stacked
	}
	var (
		mu     sync.Mutex
		calls  []Call
		failed atomic.Int64
		wg     sync.WaitGroup
	)
	lightEnd := time.Now().Add(load.Light)
	spike := lightEnd.Add(load.Idle)
	deadline := spike.Add(load.Duration)
	for range load.Goroutines {
		wg.Go(func() {
			var mine []Call
			for time.Now().Before(deadline) {
				switch now := time.Now(); {
				case now.Before(lightEnd):
					time.Sleep(load.LightEvery)
				case now.Before(spike):
					time.Sleep(spike.Sub(now))
					continue
				}
				start := time.Now().UnixNano()
				d, err := l.AllowN(context.Background(), load.Key, load.Limit, 1)
				end := time.Now().UnixNano()
				if err != nil {
					failed.Add(1)
					continue
				}
				mine = append(mine, Call{Start: start, End: end, Allowed: d.Allowed})
			}
			mu.Lock()
			calls = append(calls, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("%d calls failed", n)
	}
	for _, c := range calls {
		if _, err := fmt.Fprintf(out, "%d %d %t\n", c.Start, c.End, c.Allowed); err != nil {
			return err
		}
	}
	return nil
}

func parseCalls(data []byte) ([]Call, error) {
	var calls []Call
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var c Call
		if _, err := fmt.Sscanf(line, "%d %d %t", &c.Start, &c.End, &c.Allowed); err != nil {
			return nil, fmt.Errorf("line %q: %w", line, err)
		}
		calls = append(calls, c)
	}
	return calls, nil
}

// Allowed returns the allowed calls, by start.
func Allowed(calls []Call) []Call {
	var out []Call
	for _, c := range calls {
		if c.Allowed {
			out = append(out, c)
		}
	}
	return out
}

// Span returns the time from the first call's start to the last call's end.
func Span(calls []Call) time.Duration {
	if len(calls) == 0 {
		return 0
	}
	last := calls[0].End
	for _, c := range calls {
		last = max(last, c.End)
	}
	return time.Duration(last - calls[0].Start)
}

// Saturated returns how long, within a run of calls (sorted by Start),
// the calls show their limiter saturated: the time t, from the first
// call's start to the last denied call's start, such that a denied call
// lies wholly within (t - d, t], so that a denial was surely decided less
// than d before t. A lower bound on admissions owes the limit over this
// time only: a loaded machine that gives the callers or the server no CPU
// for a while leaves the limit unclaimed, and this time out.
func Saturated(calls []Call, d time.Duration) time.Duration {
	if len(calls) == 0 {
		return 0
	}
	from, to := calls[0].Start, int64(math.MinInt64)
	type interval struct{ lo, hi int64 }
	var covered []interval
	for _, c := range calls {
		if c.Allowed {
			continue
		}
		to = max(to, c.Start)
		// c lies within (t - d, t] for t in [c.End, c.Start + d).
		if lo, hi := c.End, c.Start+int64(d); lo < hi {
			covered = append(covered, interval{lo, hi})
		}
	}
	sort.Slice(covered, func(i, j int) bool { return covered[i].lo < covered[j].lo })
	var total int64
	cur := from // the covered time is counted up to cur
	for _, iv := range covered {
		lo, hi := max(iv.lo, cur), min(iv.hi, to)
		if lo < hi {
			total += hi - lo
			cur = hi
		}
	}
	return time.Duration(total)
}

// MaxSurelyWithin returns the largest number of allowed calls that surely
// happened within one interval shorter than d: calls whose whole
// [Start, End] lies in [s, s + d) for some s. It never overstates (a call's
// decision instant is only known to lie within its [Start, End]), so a
// bound it breaks is truly broken. calls must be sorted by Start.
func MaxSurelyWithin(calls []Call, d time.Duration) int {
	best := 0
	for i, first := range calls {
		n := 0
		for _, c := range calls[i:] {
			if c.Start >= first.Start+int64(d) {
				break
			}
			if c.End < first.Start+int64(d) {
				n++
			}
		}
		best = max(best, n)
	}
	return best
}

// BucketExcess checks the bucket bound on allowed calls (sorted by Start):
// within any interval shorter than d, at most Burst + Rate x d were
// allowed, for every d of ds. It returns the largest excess over the bound
// (negative when every window is under it) and the d it was found at.
func BucketExcess(allowed []Call, limit sluice.Limit, ds ...time.Duration) (excess float64, at time.Duration) {
	excess = -float64(limit.Burst) - 1
	for _, d := range ds {
		bound := float64(limit.Burst) + float64(limit.Rate)*d.Seconds()/limit.Period.Seconds()
		if e := float64(MaxSurelyWithin(allowed, d)) - bound; e > excess {
			excess, at = e, d
		}
	}
	return excess, at
}
