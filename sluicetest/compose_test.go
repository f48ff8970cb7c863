package sluicetest_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/shard"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/builtins"
	"github.com/sluicehq/sluice/sluicetest/redistest"
)

// The composition tests build stacks of decorators (builtins.Decorators,
// outermost first) over an algorithm and check what still holds of the
// conformance properties through them.

// recommended are the stacks the docs recommend (README.md,
// docs/scaling.md, docs/failure.md, docs/http.md), with their algorithm.
var recommended = []struct {
	stack []string
	alg   string
}{
	{[]string{"sluiceotel", "fallback", "lease"}, "tokenbucket"},
	{[]string{"shard", "lease"}, "tokenbucket"},
	{[]string{"lease", "coalesce"}, "tokenbucket"},
	{[]string{"fallback", "denycache", "coalesce"}, "tokenbucket"},
	{[]string{"sluiceotel", "fallback", "shard", "lease"}, "gcra"},
	{[]string{"sluiceotel", "fallback", "denycache", "coalesce"}, "tokenbucket"},
}

// stackName writes a stack as calls: sluiceotel(fallback(lease(tokenbucket))).
func stackName(stack []string, alg string) string {
	return strings.Join(stack, "(") + "(" + alg + strings.Repeat(")", len(stack))
}

// composeLimit is a limit that does not refill during a test (one token
// in 5 minutes for the buckets, a window of an hour), of capacity 200, and
// that shard splits into ComposeShards shares.
func composeLimit(alg sluicetest.Algorithm) sluice.Limit {
	if alg.IntegerState { // the bucket algorithms: capacity is Burst
		return sluice.Limit{Rate: 12, Period: time.Hour, Burst: 200}
	}
	return sluice.Limit{Rate: 200, Period: time.Hour, Burst: 200}
}

// leases reports whether an algorithm serves leases (ext.Leaser and
// ext.LeaseBatcher).
func leases(alg string) bool { return alg == "tokenbucket" || alg == "gcra" }

// capabilityNames are the optional interfaces, in the order of
// sluicetest.Capabilities.
var capabilityNames = []string{"refund", "reset", "batch", "bound", "lease", "leasebatch"}

// predicted is what the capability contract says of a stack, worked out
// independently of the decorators' code: every decorator serves what is
// below it (found with sluice.As), with these exceptions. A lease needs
// leases below it, serves none above it (neither lease nor leasebatch),
// and always serves batches and Capacity; coalesce needs batches and
// always serves them; shard always serves Capacity and forwards no batch
// of leases (it leases one request at a time); a shard does not wrap a
// shard.
type predicted struct {
	caps []string // what sluicetest.Capabilities returns
	// fails is the index in the stack of the layer that cannot be built
	// (the innermost such), or -1; below is the type it cannot wrap, and
	// missing the interface that type lacks ("" for a shard over a shard).
	fails          int
	below, missing string
}

func predict(stack []string, alg string) predicted {
	served := map[string]bool{"refund": true, "reset": true, "batch": true, "bound": true}
	if leases(alg) {
		served["lease"], served["leasebatch"] = true, true
	}
	below := "*" + alg + ".Limiter"
	for i := len(stack) - 1; i >= 0; i-- {
		need, missing := "", ""
		switch stack[i] {
		case "lease":
			need, missing = "lease", "ext.Leaser"
		case "coalesce":
			need, missing = "batch", "sluice.BatchLimiter"
		}
		if need != "" && !served[need] {
			return predicted{fails: i, below: below, missing: missing}
		}
		if stack[i] == "shard" && i+1 < len(stack) && stack[i+1] == "shard" {
			return predicted{fails: i, below: below} // a shard's shares are not split again
		}
		switch stack[i] {
		case "lease":
			served["lease"], served["leasebatch"] = false, false
			served["batch"], served["bound"] = true, true
		case "coalesce":
			served["batch"] = true
		case "shard":
			served["bound"] = true
			served["leasebatch"] = false
		}
		below = "*" + stack[i] + ".Limiter"
	}
	var caps []string
	for _, name := range capabilityNames {
		if served[name] {
			caps = append(caps, name)
		}
	}
	return predicted{caps: caps, fails: -1}
}

// floorOf is the fewest cost-1 requests a stack must admit on a key under
// limit (frozen clock, one process, more requests than the capacity)
// before it may deny one, capacity the algorithm's, by design:
//   - the algorithms, coalesce, denycache, fallback (healthy store),
//     sluiceotel: the whole capacity. A lease in one process spends
//     every token it takes before it is denied, so it strands nothing.
//   - shard (S shares): a request is denied only when the two shares it
//     tried deny, so at least the two smallest shares' floors.
//   - a lease above a shard: the lease's holder leases from one share
//     only (shard.HolderShare), so one process gets at most one share;
//     the floor is the smallest share's.
func floorOf(stack []string, limit sluice.Limit, capacity func(sluice.Limit) int64, leased bool) int64 {
	if len(stack) == 0 {
		return capacity(limit)
	}
	rest := stack[1:]
	switch stack[0] {
	case "lease":
		return floorOf(rest, limit, capacity, true)
	case "shard":
		s := shard.Count(limit, builtins.ComposeShards)
		if s == 1 {
			return floorOf(rest, limit, capacity, leased)
		}
		floors := make([]int64, s)
		for i := range floors {
			floors[i] = floorOf(rest, shard.Share(limit, s, i), capacity, leased)
		}
		slices.Sort(floors)
		if leased {
			return floors[0]
		}
		return floors[0] + floors[1]
	}
	return floorOf(rest, limit, capacity, leased)
}

// capacityOf is what a stack's Capacity must report: the algorithm's,
// or under a shard the smallest share's.
func capacityOf(stack []string, limit sluice.Limit, capacity func(sluice.Limit) int64) int64 {
	if len(stack) == 0 {
		return capacity(limit)
	}
	if stack[0] != "shard" {
		return capacityOf(stack[1:], limit, capacity)
	}
	s := shard.Count(limit, builtins.ComposeShards)
	least := capacityOf(stack[1:], shard.Share(limit, s, 0), capacity)
	for i := range s {
		least = min(least, capacityOf(stack[1:], shard.Share(limit, s, i), capacity))
	}
	return least
}

// estimates reports whether a stack may mark decisions Estimated.
func estimates(stack []string) bool {
	return slices.Contains(stack, "lease") || slices.Contains(stack, "shard")
}

// checkDecision returns what is wrong with d, a decision of the stack on
// limit (whole capacity capacity), or "".
func checkDecision(d sluice.Decision, stack []string, limit sluice.Limit, capacity int64) string {
	switch {
	case d.Limit != limit:
		return fmt.Sprintf("Limit %v, want the caller's %v", d.Limit, limit)
	case d.Remaining < 0 || d.Remaining > capacity:
		return fmt.Sprintf("Remaining %d outside [0, %d]", d.Remaining, capacity)
	case d.Source == sluice.SourceLease && !slices.Contains(stack, "lease"):
		return "Source lease, through no lease"
	case d.Source != sluice.SourceStore && d.Source != sluice.SourceLease:
		return fmt.Sprintf("Source %s on a healthy store", d.Source)
	case d.Allowed && d.RetryAfter != 0:
		return fmt.Sprintf("allowed with RetryAfter %s", d.RetryAfter)
	case !d.Allowed && d.RetryAfter <= 0:
		return fmt.Sprintf("denied with RetryAfter %s", d.RetryAfter)
	case d.Estimated && !estimates(stack):
		return "Estimated, through no lease and no shard"
	}
	return ""
}

// composeTier is a store for the composition tests and whether its
// algorithms get a frozen fake clock (the in-process tier).
type composeTier struct {
	name   string
	store  func(t *testing.T) sluice.Store
	frozen bool
}

var memTier = composeTier{name: "memstore", store: func(t *testing.T) sluice.Store { return sluicetest.MemTier(t).Store }, frozen: true}

func redisTiers() []composeTier {
	return []composeTier{
		{name: "redis/go-redis", store: func(t *testing.T) sluice.Store { return redistest.GoRedisTier(t, redistest.SharedRedis(t)).Store }},
		{name: "redis/rueidis", store: func(t *testing.T) sluice.Store { return redistest.RueidisTier(t, redistest.SharedRedis(t)).Store }},
	}
}

// buildStack builds stack over a new alg on tier's store and checks the
// construction against predict. It returns nil for a stack that cannot be
// built. The stack's leases are closed when the test ends.
func buildStack(t *testing.T, tier composeTier, alg sluicetest.Algorithm, stack []string) sluice.Limiter {
	t.Helper()
	var clock sluice.Clock
	if tier.frozen {
		clock = sluicetest.NewFakeClock(sluicetest.Epoch)
	}
	base, err := alg.New(tier.store(t), clock)
	require.NoError(t, err)
	want := predict(stack, alg.Name)
	l, closeStack, err := func() (l sluice.Limiter, c func() error, err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v", p)
			}
		}()
		return builtins.Stack(base, stack...)
	}()
	if want.fails >= 0 {
		require.Error(t, err, "%s must not be built", stackName(stack, alg.Name))
		require.ErrorIs(t, err, sluice.ErrUnsupported)
		require.Contains(t, err.Error(), stack[want.fails]+" cannot wrap "+want.below, "the error names both layers")
		if want.missing != "" {
			require.Contains(t, err.Error(), want.below+", which is no "+want.missing, "and what the layer below lacks")
		}
		t.Logf("not built: %v", err)
		return nil
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, closeStack()) })
	require.Equal(t, want.caps, sluicetest.Capabilities(t, l), "capabilities of %s", stackName(stack, alg.Name))
	return l
}

// checkStack runs the properties that hold through a stack that was built.
func checkStack(t *testing.T, l sluice.Limiter, alg sluicetest.Algorithm, stack []string) {
	limit := composeLimit(alg)
	capacity := alg.Capacity(limit)
	floor := floorOf(stack, limit, alg.Capacity, false)
	calls := int(2*capacity + 20)
	tag := sluicetest.UniqueKey(t)
	ctx := t.Context()

	// The bound, one goroutine and eight, and every decision's fields.
	t.Run("bound", func(t *testing.T) {
		key := sluice.Key(tag, "sequential")
		var admitted int64
		for i := range calls {
			d, err := l.AllowN(ctx, key, limit, 1)
			require.NoError(t, err, "call %d", i)
			if bad := checkDecision(d, stack, limit, capacity); bad != "" {
				t.Fatalf("call %d: %s: %+v", i, bad, d)
			}
			if d.Allowed {
				admitted++
			}
		}
		t.Logf("sequential: %d admitted of %d calls (capacity %d, floor %d)", admitted, calls, capacity, floor)
		require.LessOrEqual(t, admitted, capacity, "over-admission")
		require.GreaterOrEqual(t, admitted, floor, "under-admission")

		key = sluice.Key(tag, "concurrent")
		var (
			mu       sync.Mutex
			problems []string
			wg       sync.WaitGroup
		)
		admitted = 0
		for range 8 {
			wg.Go(func() {
				var mine int64
				for range calls / 8 {
					d, err := l.AllowN(ctx, key, limit, 1)
					bad := checkDecision(d, stack, limit, capacity)
					if err != nil {
						bad = err.Error()
					}
					if d.Allowed {
						mine++
					}
					if bad != "" {
						mu.Lock()
						problems = append(problems, fmt.Sprintf("%s: %+v", bad, d))
						mu.Unlock()
						return
					}
				}
				mu.Lock()
				admitted += mine
				mu.Unlock()
			})
		}
		wg.Wait()
		require.Empty(t, problems)
		t.Logf("concurrent: %d admitted of %d calls", admitted, calls/8*8)
		require.LessOrEqual(t, admitted, capacity, "over-admission")
		require.GreaterOrEqual(t, admitted, floor, "under-admission")
	})

	// Bad input is an error, never a decision.
	t.Run("bad input", func(t *testing.T) {
		key := sluice.Key(tag, "bad")
		before, err := l.AllowN(ctx, key, limit, 0)
		require.NoError(t, err)
		for _, c := range []struct {
			name  string
			key   string
			limit sluice.Limit
			n     int64
			want  error
		}{
			{"negative cost", key, limit, -1, sluice.ErrInvalidCost},
			{"cost above capacity", key, limit, capacity + 1, sluice.ErrCostExceedsBurst},
			{"cost above the stack's capacity", key, limit, capacityOf(stack, limit, alg.Capacity) + 1, sluice.ErrCostExceedsBurst},
			{"rate 0", key, sluice.Limit{Rate: 0, Period: time.Hour, Burst: 200}, 1, sluice.ErrInvalidLimit},
			{"empty key", "", limit, 1, sluice.ErrInvalidKey},
		} {
			d, err := l.AllowN(ctx, c.key, c.limit, c.n)
			require.ErrorIs(t, err, c.want, "%s: %+v", c.name, d)
			require.Equal(t, sluice.Decision{}, d, "%s: no decision with the error", c.name)
		}
		after, err := l.AllowN(ctx, key, limit, 0)
		require.NoError(t, err)
		require.Equal(t, before.Remaining, after.Remaining, "an invalid request consumed nothing")
	})

	// Every capability served works; every one not served is found
	// neither by sluice.As nor by a type assertion.
	t.Run("capabilities", func(t *testing.T) {
		want := predict(stack, alg.Name).caps
		key := sluice.Key(tag, "caps")
		fresh, err := l.AllowN(ctx, sluice.Key(tag, "fresh"), limit, 0)
		require.NoError(t, err)
		// served requires that sluice.As finds the capability name exactly
		// when it is predicted, and that a type assertion claims it only
		// then.
		served := func(name string, asOK, typeOK bool) bool {
			t.Helper()
			require.Equal(t, slices.Contains(want, name), asOK, "sluice.As of %s", name)
			require.False(t, typeOK && !asOK, "%T implements %s, which sluice.As denies", l, name)
			return asOK
		}
		_, err = l.AllowN(ctx, key, limit, 3)
		require.NoError(t, err)

		r, ok := sluice.As[sluice.Refunder](l)
		_, typeOK := l.(sluice.Refunder)
		if served("refund", ok, typeOK) {
			d, err := r.Refund(ctx, key, limit, 1)
			require.NoError(t, err)
			require.True(t, d.Allowed, "a refund's Decision is allowed")
			if bad := checkDecision(d, stack, limit, capacity); bad != "" {
				t.Fatalf("refund: %s", bad)
			}
		}

		b, ok := sluice.As[sluice.BatchLimiter](l)
		_, typeOK = l.(sluice.BatchLimiter)
		if served("batch", ok, typeOK) {
			res, err := b.AllowBatch(ctx, []sluice.Request{{Key: key, Limit: limit, N: 1}})
			require.NoError(t, err)
			require.Len(t, res, 1)
			require.NoError(t, res[0].Err)
			if bad := checkDecision(res[0].Decision, stack, limit, capacity); bad != "" {
				t.Fatalf("batch: %s", bad)
			}
		}

		bd, ok := sluice.As[sluice.Bounded](l)
		_, typeOK = l.(sluice.Bounded)
		if served("bound", ok, typeOK) {
			got, err := bd.Capacity("k", limit)
			require.NoError(t, err)
			require.Equal(t, capacityOf(stack, limit, alg.Capacity), got, "Capacity")
		}

		le, leaseOK := sluice.As[ext.Leaser](l)
		_, typeOK = l.(ext.Leaser)
		if served("lease", leaseOK, typeOK) {
			holder := rand.Int64N(1<<62) + 1
			g, err := le.Lease(ctx, ext.LeaseRequest{Key: key, Limit: limit, Holder: holder, Cost: 1, Extra: 2, Hold: time.Second})
			require.NoError(t, err)
			require.True(t, g.Allowed)
			if bad := checkDecision(g.Decision, stack, limit, capacity); bad != "" {
				t.Fatalf("lease: %s", bad)
			}
			d, err := le.Release(ctx, key, limit, holder, g.Reserved)
			require.NoError(t, err)
			if bad := checkDecision(d, stack, limit, capacity); bad != "" {
				t.Fatalf("release: %s", bad)
			}
		}

		lb, ok := sluice.As[ext.LeaseBatcher](l)
		_, typeOK = l.(ext.LeaseBatcher)
		if served("leasebatch", ok, typeOK) {
			require.True(t, leaseOK, "what serves batches of leases serves their release")
			holder := rand.Int64N(1<<62) + 1
			res, err := lb.LeaseBatch(ctx, []ext.LeaseRequest{{Key: key, Limit: limit, Holder: holder, Cost: 1, Extra: 2, Hold: time.Second}})
			require.NoError(t, err)
			require.Len(t, res, 1)
			require.NoError(t, res[0].Err)
			require.True(t, res[0].Allowed)
			if bad := checkDecision(res[0].Decision, stack, limit, capacity); bad != "" {
				t.Fatalf("lease batch: %s", bad)
			}
			_, err = le.Release(ctx, key, limit, holder, res[0].Reserved)
			require.NoError(t, err)
		}

		rs, ok := sluice.As[sluice.Resetter](l)
		_, typeOK = l.(sluice.Resetter)
		if served("reset", ok, typeOK) {
			require.NoError(t, rs.Reset(ctx, key))
			d, err := l.AllowN(ctx, key, limit, 0)
			require.NoError(t, err)
			require.Equal(t, fresh.Remaining, d.Remaining, "as a fresh key after Reset")
		}
	})
}

// matrixStacks is every decorator alone and every ordered pair (outer,
// inner) of decorators, the same one twice included.
func matrixStacks() [][]string {
	var stacks [][]string
	for _, outer := range builtins.Decorators {
		stacks = append(stacks, []string{outer.Name})
		for _, inner := range builtins.Decorators {
			stacks = append(stacks, []string{outer.Name, inner.Name})
		}
	}
	return stacks
}

// TestCompositionMatrix builds every decorator alone, every ordered pair
// of decorators and every recommended stack over each of the five
// algorithms on the pure-Go tier (memstore, a frozen fake clock). A stack
// is built exactly when the capability contract says it can be (a lease
// needs a limiter that leases, and serves no lease above it; coalesce
// needs batches); otherwise New returns an error wrapping
// sluice.ErrUnsupported that names both layers. Through every stack that
// is built: cost-1 calls, one goroutine and eight, admit at most the
// capacity and at least the floor floorOf states; bad input is an error;
// every decision's fields mean what sluice.Decision says; and every
// capability is served (sluice.As finds it) exactly when predicted, and
// works.
func TestCompositionMatrix(t *testing.T) {
	stacks := matrixStacks()
	for _, r := range recommended {
		if !slices.ContainsFunc(stacks, func(s []string) bool { return slices.Equal(s, r.stack) }) {
			stacks = append(stacks, r.stack)
		}
	}
	valid := map[string][]string{}
	for _, alg := range builtins.Algorithms {
		for _, stack := range stacks {
			name := stackName(stack, alg.Name)
			t.Run(name, func(t *testing.T) {
				l := buildStack(t, memTier, alg, stack)
				if l == nil {
					return
				}
				checkStack(t, l, alg, stack)
			})
			ok := predict(stack, alg.Name).fails < 0
			// The rule docs/composition.md states.
			leasesIn := 0
			for _, d := range stack {
				if d == "lease" {
					leasesIn++
				}
			}
			shardOverShard := false
			for i := 0; i+1 < len(stack); i++ {
				shardOverShard = shardOverShard || stack[i] == "shard" && stack[i+1] == "shard"
			}
			stated := (leasesIn == 0 || leasesIn == 1 && leases(alg.Name)) && !shardOverShard
			require.Equal(t, stated, ok, "%s: the stated rule and the contract disagree", name)
			if ok {
				valid[alg.Name] = append(valid[alg.Name], name)
			}
		}
	}
	for _, alg := range builtins.Algorithms {
		t.Logf("%s: %d of %d stacks valid", alg.Name, len(valid[alg.Name]), len(stacks))
	}
	// The pairs, outer down and inner across, must be docs/composition.md's
	// table: "yes" where valid over every algorithm, "buckets" where over
	// the token bucket and GCRA only, "no" where over none.
	var b strings.Builder
	b.WriteString("| outer \\ inner |")
	for _, inner := range builtins.Decorators {
		fmt.Fprintf(&b, " %s |", inner.Name)
	}
	b.WriteString("\n| --- |" + strings.Repeat(" --- |", len(builtins.Decorators)))
	for _, outer := range builtins.Decorators {
		fmt.Fprintf(&b, "\n| **%s** |", outer.Name)
		for _, inner := range builtins.Decorators {
			pair := []string{outer.Name, inner.Name}
			bucket, window := predict(pair, "tokenbucket").fails < 0, predict(pair, "fixedwindow").fails < 0
			require.False(t, window && !bucket, "a pair valid over windows only")
			mark := map[[2]bool]string{{true, true}: "yes", {true, false}: "buckets", {false, false}: "no"}[[2]bool{bucket, window}]
			fmt.Fprintf(&b, " %s |", mark)
		}
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "composition.md"))
	require.NoError(t, err)
	want := strings.Split(b.String(), "\n")
	at := strings.Index(string(doc), want[0]+"\n")
	require.GreaterOrEqual(t, at, 0, "docs/composition.md has no table of pairs")
	got := strings.SplitN(string(doc)[at:], "\n", len(want)+1)[:len(want)]
	require.Equal(t, want, got, "docs/composition.md's table of pairs must be what the matrix finds")
}

// TestRecommendedStacksOnRealRedis runs the recommended stacks' checks on
// a real redis-server, through go-redis and rueidis, on the server's clock.
func TestRecommendedStacksOnRealRedis(t *testing.T) {
	for _, tier := range redisTiers() {
		for _, r := range recommended {
			alg := algorithmNamed(r.alg)
			t.Run(tier.name+"/"+stackName(r.stack, r.alg), func(t *testing.T) {
				l := buildStack(t, tier, alg, r.stack)
				require.NotNil(t, l)
				checkStack(t, l, alg, r.stack)
			})
		}
	}
}

// TestComposedProcessesKeepTheBucketBound runs each recommended stack in 4
// OS processes × 4 goroutines for 1 s on one key of a real redis-server:
// over every interval from 1 ms to the whole run, the processes together
// admit at most Burst + Rate × T, the unleased, unsharded bound.
func TestComposedProcessesKeepTheBucketBound(t *testing.T) {
	server := redistest.SharedRedis(t)
	limit := sluice.Limit{Rate: 300, Period: time.Second, Burst: 60}
	windows := []time.Duration{time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond,
		100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}
	for i, r := range recommended {
		backend := []string{"go-redis", "rueidis"}[i%2]
		t.Run(backend+"/"+stackName(r.stack, r.alg), func(t *testing.T) {
			calls := builtins.RunLoad(t, builtins.Load{
				Algorithm: r.alg, Backend: backend, Addr: server.Addr(),
				Key: sluice.Key(sluicetest.UniqueKey(t)), Limit: limit,
				Processes: 4, Goroutines: 4, Duration: time.Second, Stack: r.stack,
			})
			allowed := builtins.Allowed(calls)
			span := builtins.Span(calls)
			bound := float64(limit.Burst) + float64(limit.Rate)*span.Seconds()/limit.Period.Seconds()
			excess, at := builtins.BucketExcess(allowed, limit, append(windows, span+time.Nanosecond)...)
			t.Logf("%d calls over %s, %d allowed (%.0f%% of Burst + Rate × T = %.0f); worst window %s at %.1f over its bound",
				len(calls), span.Round(time.Millisecond), len(allowed), 100*float64(len(allowed))/bound, bound, at, excess)
			require.LessOrEqual(t, excess, 0.0, "some interval of %s admitted more than Burst + Rate × T", at)
			require.Greater(t, len(calls), 2*len(allowed), "the load must exceed the limit for the test to mean anything")
		})
	}
}

func algorithmNamed(name string) sluicetest.Algorithm {
	for _, a := range builtins.Algorithms {
		if a.Name == name {
			return a
		}
	}
	panic("no algorithm " + name)
}

// TestTransparentLayersChangeNoDecision: coalesce, sluiceotel and fallback
// (on a healthy store), alone and stacked, decide every request exactly as
// the bare algorithm does: random costs (peeks included) and random steps
// of a fake clock, over limits that refill, compared with a twin on its
// own store.
func TestTransparentLayersChangeNoDecision(t *testing.T) {
	for _, alg := range builtins.Algorithms {
		for _, stack := range [][]string{{"coalesce"}, {"sluiceotel"}, {"fallback"}, {"sluiceotel", "fallback", "coalesce"}} {
			t.Run(stackName(stack, alg.Name), func(t *testing.T) {
				clock := sluicetest.NewFakeClock(sluicetest.Epoch)
				bare, err := alg.New(sluicetest.MemTier(t).Store, clock)
				require.NoError(t, err)
				base, err := alg.New(sluicetest.MemTier(t).Store, clock)
				require.NoError(t, err)
				l, closeStack, err := builtins.Stack(base, stack...)
				require.NoError(t, err)
				defer func() { require.NoError(t, closeStack()) }()
				rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
				key := sluice.Key(sluicetest.UniqueKey(t))
				for i := range 300 {
					clock.Advance(time.Duration(rng.Int64N(int64(150 * time.Millisecond))))
					limit := alg.Limits[rng.IntN(len(alg.Limits))]
					n := rng.Int64N(alg.Capacity(limit) + 1)
					want, err := bare.AllowN(t.Context(), key, limit, n)
					require.NoError(t, err)
					got, err := l.AllowN(t.Context(), key, limit, n)
					require.NoError(t, err)
					require.Equal(t, want, got, "step %d: n=%d under %s", i, n, limit)
				}
			})
		}
	}
}
