package sluicetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memstore"
)

// Tier is one way of running Sluice's scripts, handed to [RunConformance]:
// a store and the means to look at what it stored.
type Tier struct {
	// Name labels the tier in test output ("memstore", "miniredis",
	// "redis/go-redis", ...).
	Name string
	// Store runs the scripts.
	Store sluice.Store
	// Get returns the raw value stored at key, and false if there is none
	// (for a structured value on the in-process tier, a placeholder).
	Get func(ctx context.Context, key string) (string, bool, error)
	// TTL returns the time to live of key, and false if there is none.
	TTL func(ctx context.Context, key string) (time.Duration, bool, error)
	// Raw, when not nil, runs a script with arbitrary string arguments
	// (bypassing the Store's []int64), so that the script's own validation
	// of non-numeric input can be tested; an error reply comes back as an
	// *ext.ServerError, as from a Store. Nil on the in-process tier, whose
	// arguments are typed. The batch tests also run a script through it
	// that removes their keys' expiry: a tier whose keys expire in real
	// time (a Redis server's) needs it, see persist.
	Raw func(ctx context.Context, script *sluice.Script, keys []string, args ...string) ([]int64, error)
}

// Limiter is what every Sluice algorithm offers on its concrete type.
type Limiter interface {
	sluice.Limiter
	sluice.BatchLimiter
	sluice.Refunder
	sluice.Resetter
	sluice.Bounded
}

// Algorithm describes one algorithm to the conformance suite.
type Algorithm struct {
	Name string
	// New builds the limiter; a nil clock means the server clock.
	New func(store sluice.Store, clock sluice.Clock) (Limiter, error)
	// Script is the decision script, for calls with raw arguments.
	Script *sluice.Script
	// KeySuffix names the state key: the caller's key plus the suffix.
	KeySuffix string
	// IntegerState says the state key holds one integer, Unix
	// microseconds of a future time (the bucket algorithms).
	IntegerState bool
	// Capacity is the largest cost a limit allows: Burst or Rate.
	Capacity func(sluice.Limit) int64
	// Vectors are the algorithm's hand-worked decisions.
	Vectors []Vector
	// Limits are valid limits for the random sequences.
	Limits []sluice.Limit
}

// Epoch is the fake clock's start in the conformance vectors: a Unix
// microsecond value with 16 significant digits and non-zero trailing
// digits, so that any loss of precision in a script changes a decision.
// A one-second window has run for 123457 µs at Epoch.
var Epoch = time.UnixMicro(1_767_225_600_123_457) // 2026-01-01T00:00:00.123457Z

// RunConformance runs the conformance tests of each algorithm of algs
// against the tier built by newTier: its hand-worked vectors, random
// sequences checked against its Go twin on the in-process store, its
// batches decided as one by one, its validation of bad input and its
// state's keys and TTLs. Every tier runs the same tests and must produce
// the same decisions.
func RunConformance(t *testing.T, newTier func(t *testing.T) Tier, algs ...Algorithm) {
	for _, alg := range algs {
		t.Run(alg.Name, func(t *testing.T) { runAlgorithm(t, alg, newTier) })
		t.Run(alg.Name+"/batch decides as one by one", func(t *testing.T) { runBatch(t, alg, newTier) })
	}
}

// runBatch: random batches (1 to 8 requests, every tenth up to 256, over
// three keys, one key or a key each, one limit for the batch or one per
// request, random costs) decide as the same requests made one
// by one at the same instant on twin keys; invalid batches are refused
// before anything is sent.
func runBatch(t *testing.T, alg Algorithm, newTier func(t *testing.T) Tier) {
	t.Parallel()
	tier := newTier(t)
	clock := NewFakeClock(Epoch)
	l, err := alg.New(tier.Store, clock)
	noError(t, err)
	tag := UniqueKey(t)
	rng := newRand(t)
	for step := range 150 {
		clock.Advance(time.Duration(rng.Int64N(int64(300*time.Millisecond))) - 10*time.Millisecond)
		limit := alg.Limits[rng.IntN(len(alg.Limits))]
		perRequest := rng.IntN(2) == 0
		size := 1 + rng.IntN(8)
		if step%10 == 9 {
			size = 1 + rng.IntN(sluice.MaxBatch) // more than one word of a batch's allowed bits
		}
		keys := rng.IntN(3) // 0: three keys, 1: one key, 2: a key each
		reqs := make([]sluice.Request, size)
		for i := range reqs {
			if perRequest {
				limit = alg.Limits[rng.IntN(len(alg.Limits))]
			}
			key := strconv.Itoa(rng.IntN(3))
			switch keys {
			case 1:
				key = "0"
			case 2:
				key = strconv.Itoa(i)
			}
			reqs[i] = sluice.Request{Key: sluice.Key(tag, "batch", key), Limit: limit, N: rng.Int64N(alg.Capacity(limit) + 1)}
		}
		got, err := l.AllowBatch(t.Context(), reqs)
		noError(t, err)
		equal(t, len(reqs), len(got))
		stateKeys := make([]string, 0, 2*len(reqs))
		for i, r := range reqs {
			single := strings.Replace(r.Key, ":batch:", ":single:", 1)
			want, err := l.AllowN(t.Context(), single, r.Limit, r.N)
			noError(t, err)
			noError(t, got[i].Err, "step %d request %d", step, i)
			equal(t, want, got[i].Decision, "step %d request %d", step, i)
			stateKeys = append(stateKeys, r.Key+alg.KeySuffix, single+alg.KeySuffix)
		}
		persist(t, tier, stateKeys)
	}
	limit := alg.Limits[0]
	for _, bad := range [][]sluice.Request{
		nil,
		make([]sluice.Request, 257),
		{{Key: sluice.Key(tag, "ok"), Limit: limit, N: 1}, {Key: "", Limit: limit, N: 1}},
		{{Key: sluice.Key(tag, "ok"), Limit: limit, N: 1}, {Key: sluice.Key(tag, "ok"), Limit: limit, N: -1}},
		{{Key: sluice.Key(tag, "ok"), Limit: limit, N: alg.Capacity(limit) + 1}},
	} {
		_, err := l.AllowBatch(t.Context(), bad)
		isError(t, err)
	}
	_, found, err := tier.Get(t.Context(), sluice.Key(tag, "ok")+alg.KeySuffix)
	noError(t, err)
	isFalse(t, found, "an invalid batch consumed nothing")
}

// persistScript removes the expiry of every key it is given.
var persistScript = sluice.NewScript("for _, k in ipairs(KEYS) do redis.call('PERSIST', k) end\nreturn {}", nil)

// persist removes the expiry of keys on a tier whose keys expire in real
// time (a Redis server's: a tier with Raw), so that runBatch's twins
// differ only by what they were asked. The fake clock runs about twenty
// times faster than real time, and one request can shorten a key's
// expiry to a second past its newest state (a 13 ms limit on a key that
// also holds a minute's): the key can then expire in real time between
// the batch's read of it and its twin's, some milliseconds apart, and the
// twin be decided on an empty state while the batch was not. Each tier's
// expiries themselves are held by the state, TTL tests of runAlgorithm.
// The in-process tier's expire on the fake clock, which stops in a step.
func persist(t *testing.T, tier Tier, keys []string) {
	t.Helper()
	if tier.Raw == nil || len(keys) == 0 {
		return
	}
	_, err := tier.Raw(t.Context(), persistScript, keys)
	noError(t, err)
}

func newRand(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 42))
}

func runAlgorithm(t *testing.T, alg Algorithm, newTier func(t *testing.T) Tier) {
	setup := func(t *testing.T) (Tier, *FakeClock, Limiter, string) {
		t.Parallel()
		tier := newTier(t)
		clock := NewFakeClock(Epoch)
		l, err := alg.New(tier.Store, clock)
		noError(t, err)
		return tier, clock, l, UniqueKey(t)
	}

	for _, v := range alg.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			tier, clock, l, key := setup(t)
			for i, s := range v.Steps {
				clock.Advance(s.Advance)
				limit, k := v.Limit, key
				if s.Limit != (sluice.Limit{}) {
					limit = s.Limit
				}
				if s.Key != "" {
					k = key + ":" + s.Key
				}
				call := l.AllowN
				if s.Refund {
					call = l.Refund
				}
				got, err := call(t.Context(), k, limit, s.N)
				noError(t, err, "step %d", i)
				want := s.Want
				want.Limit = limit
				equal(t, want, got, "%s: step %d (n=%d, refund %v)", tier.Name, i, s.N, s.Refund)
			}
		})
	}

	limit := sluice.Limit{Rate: 10, Period: time.Second, Burst: 5}
	capacity := alg.Capacity(limit)

	t.Run("state, TTL, and no writes on denial or peek", func(t *testing.T) {
		tier, _, l, key := setup(t)
		stateKey := key + alg.KeySuffix
		_, err := l.AllowN(t.Context(), key, limit, 4)
		noError(t, err)
		raw, ok, err := tier.Get(t.Context(), stateKey)
		noError(t, err)
		isTrue(t, ok, "state stored at the key plus %q", alg.KeySuffix)
		ttl, ok, err := tier.TTL(t.Context(), stateKey)
		noError(t, err)
		isTrue(t, ok, "every write sets a TTL")
		greater(t, ttl, time.Second, "the TTL covers the state's life plus a 1 s margin")
		lessOrEqual(t, ttl, 2*limit.Period+time.Second)
		if alg.IntegerState {
			// Exact microseconds: through Lua's tostring or '..' this
			// would read 1.7672256004235e+15. A script stores it as "0x"
			// and 14 hex digits (cheaper to read back than decimal); the
			// in-process tier ("memstore", perhaps with a suffix) holds
			// the integer itself.
			full := Epoch.UnixMicro() + 400_000
			want := fmt.Sprintf("0x%014x", full)
			if strings.HasPrefix(tier.Name, "memstore") {
				want = strconv.FormatInt(full, 10)
			}
			equal(t, want, raw)
			// Full at 600.523457 s past the minute: the key lives to the
			// whole second after, plus 1 s (602 s), 1.876543 s from now.
			inDelta(t, float64(1876*time.Millisecond), float64(ttl), float64(100*time.Millisecond), "to the whole second after full, plus 1 s")
		}

		_, err = l.AllowN(t.Context(), key, limit, capacity) // denied
		noError(t, err)
		_, err = l.AllowN(t.Context(), key, limit, 0)
		noError(t, err)
		again, _, err := tier.Get(t.Context(), stateKey)
		noError(t, err)
		equal(t, raw, again, "a denial and a peek write nothing")

		_, err = l.AllowN(t.Context(), key+":peek", limit, 0)
		noError(t, err)
		_, ok, err = tier.Get(t.Context(), key+":peek"+alg.KeySuffix)
		noError(t, err)
		isFalse(t, ok, "a peek of a missing key creates nothing")

		noError(t, l.Reset(t.Context(), key))
		_, ok, err = tier.Get(t.Context(), stateKey)
		noError(t, err)
		isFalse(t, ok, "Reset deletes the state")
		d, err := l.AllowN(t.Context(), key, limit, 0)
		noError(t, err)
		equal(t, capacity, d.Remaining, "after Reset, the full limit")
	})

	t.Run("peek consumes nothing", func(t *testing.T) {
		_, _, l, key := setup(t)
		_, err := l.AllowN(t.Context(), key, limit, 2)
		noError(t, err)
		p1, err := l.AllowN(t.Context(), key, limit, 0)
		noError(t, err)
		p2, err := l.AllowN(t.Context(), key, limit, 0)
		noError(t, err)
		equal(t, p1, p2)
		equal(t, capacity-2, p1.Remaining)
		d, err := l.AllowN(t.Context(), key, limit, 1)
		noError(t, err)
		isTrue(t, d.Allowed)
		equal(t, p1.Remaining-1, d.Remaining)
	})

	t.Run("server clock by default", func(t *testing.T) {
		t.Parallel()
		tier := newTier(t)
		l, err := alg.New(tier.Store, nil)
		noError(t, err)
		key := UniqueKey(t)
		// Two a day: a window boundary during the test is unlikely.
		daily := sluice.Limit{Rate: 2, Period: 24 * time.Hour, Burst: 2}
		for _, want := range []bool{true, true, false} {
			d, err := l.AllowN(t.Context(), key, daily, 1)
			noError(t, err)
			equal(t, want, d.Allowed)
		}
		if alg.IntegerState {
			raw, ok, err := tier.Get(t.Context(), key+alg.KeySuffix)
			noError(t, err)
			isTrue(t, ok)
			// 0x-prefixed hex on Redis (a key written again in a later
			// second ends in a space), decimal in memory.
			tat, err := strconv.ParseInt(strings.TrimSuffix(raw, " "), 0, 64)
			noError(t, err)
			// The server's now plus two twelve-hour intervals.
			inDelta(t, float64(time.Now().Add(24*time.Hour).UnixMicro()), float64(tat), float64(time.Minute.Microseconds()))
		}
	})

	t.Run("invalid input is rejected before any write", func(t *testing.T) {
		tier, _, l, key := setup(t)
		cases := []struct {
			name  string
			key   string
			limit sluice.Limit
			n     int64
			is    []error
		}{
			{"zero limit", key, sluice.Limit{}, 1, []error{sluice.ErrInvalidLimit}},
			{"zero rate", key, sluice.Limit{Rate: 0, Period: time.Second, Burst: 1}, 1, []error{sluice.ErrInvalidLimit}},
			{"negative rate", key, sluice.Limit{Rate: -5, Period: time.Second, Burst: 1}, 1, []error{sluice.ErrInvalidLimit}},
			{"period under 1 ms", key, sluice.Limit{Rate: 1, Period: 999 * time.Microsecond, Burst: 1}, 1, []error{sluice.ErrInvalidLimit}},
			{"negative period", key, sluice.Limit{Rate: 1, Period: -time.Second, Burst: 1}, 1, []error{sluice.ErrInvalidLimit}},
			{"period over a year", key, sluice.Limit{Rate: 1, Period: 367 * 24 * time.Hour, Burst: 1}, 1, []error{sluice.ErrInvalidLimit}},
			{"zero burst", key, sluice.Limit{Rate: 1, Period: time.Second, Burst: 0}, 1, []error{sluice.ErrInvalidLimit}},
			{"huge burst", key, sluice.Limit{Rate: 1, Period: time.Second, Burst: sluice.MaxBurst + 1}, 1, []error{sluice.ErrInvalidLimit}},
			{"huge rate", key, sluice.Limit{Rate: 1 << 62, Period: time.Second, Burst: 1}, 1, []error{sluice.ErrInvalidLimit}},
			{"more than one per microsecond", key, sluice.Limit{Rate: 2_000_001, Period: 2 * time.Second, Burst: 1}, 1, []error{sluice.ErrInvalidLimit}},
			{"negative cost", key, limit, -1, []error{sluice.ErrInvalidCost}},
			{"cost above capacity", key, limit, capacity + 1, []error{sluice.ErrInvalidCost, sluice.ErrCostExceedsBurst}},
			{"empty key", "", limit, 1, []error{sluice.ErrInvalidKey}},
		}
		for _, c := range cases {
			d, err := l.AllowN(t.Context(), c.key, c.limit, c.n)
			isError(t, err, c.name)
			for _, target := range c.is {
				errorIs(t, err, target, c.name)
			}
			equal(t, sluice.Decision{}, d, c.name)
		}
		_, err := l.Refund(t.Context(), key, limit, 0)
		errorIs(t, err, sluice.ErrInvalidCost, "a refund of 0")
		_, err = l.Refund(t.Context(), key, limit, capacity+1)
		errorIs(t, err, sluice.ErrCostExceedsBurst, "a refund above capacity")
		errorIs(t, l.Reset(t.Context(), ""), sluice.ErrInvalidKey)
		_, found, err := tier.Get(t.Context(), key+alg.KeySuffix)
		noError(t, err)
		isFalse(t, found, "nothing written")
	})

	t.Run("the script validates its own arguments", func(t *testing.T) {
		tier, _, _, key := setup(t)
		state := key + alg.KeySuffix
		now := Epoch.UnixMicro()
		cases := []struct {
			name string
			keys []string
			args []int64
			is   error
		}{
			{"zero rate", []string{state}, []int64{0, 1_000_000, 5, 1, now}, sluice.ErrInvalidLimit},
			{"rate over 1e12", []string{state}, []int64{2_000_000_000_000, 31_622_400_000_000, 1, 1, now}, sluice.ErrInvalidLimit},
			{"rate above period_us", []string{state}, []int64{1_000_001, 1_000_000, 5, 1, now}, sluice.ErrInvalidLimit},
			{"period under 1 ms", []string{state}, []int64{1, 999, 5, 1, now}, sluice.ErrInvalidLimit},
			{"negative burst", []string{state}, []int64{1, 1_000_000, -5, 1, now}, sluice.ErrInvalidLimit},
			{"burst over the maximum", []string{state}, []int64{1, 1_000_000, sluice.MaxBurst + 1, 1, now}, sluice.ErrInvalidLimit},
			{"cost above capacity", []string{state}, []int64{10, 1_000_000, 5, capacity + 1, now}, sluice.ErrCostExceedsBurst},
			{"refund above capacity", []string{state}, []int64{10, 1_000_000, 5, -capacity - 1, now}, sluice.ErrInvalidCost},
			{"negative now", []string{state}, []int64{10, 1_000_000, 5, 1, -1}, sluice.ErrInvalidLimit},
			{"now after 2100", []string{state}, []int64{10, 1_000_000, 5, 1, 4_102_444_800_000_001}, sluice.ErrInvalidLimit},
			{"missing arguments", []string{state}, []int64{10, 1_000_000}, sluice.ErrInvalidLimit},
			{"extra arguments", []string{state}, []int64{10, 1_000_000, 5, 1, now, 7}, sluice.ErrInvalidLimit},
			{"empty key", []string{""}, []int64{10, 1_000_000, 5, 1, now}, sluice.ErrInvalidKey},
			{"two keys", []string{sluice.Key(key, "a"), sluice.Key(key, "b")}, []int64{10, 1_000_000, 5, 1, now}, sluice.ErrInvalidKey},
		}
		for _, c := range cases {
			_, err := tier.Store.Run(t.Context(), alg.Script, c.keys, c.args)
			errorIs(t, err, c.is, c.name)
		}
		if tier.Raw != nil {
			for _, bad := range []string{"nan", "NaN", "inf", "-inf", "1e400", "1.5", "", "abc", "0x", "5 apples"} {
				_, err := tier.Raw(t.Context(), alg.Script, []string{state}, bad, "1000000", "5", "1")
				errorIs(t, err, sluice.ErrInvalidLimit, "rate %q", bad)
				_, err = tier.Raw(t.Context(), alg.Script, []string{state}, "10", "1000000", "5", bad)
				errorIs(t, err, sluice.ErrInvalidCost, "cost %q", bad)
			}
			// Packed (sluice.Script.Args): one argument of 28 or 35 bytes.
			for _, size := range []int{0, 7, 14, 27, 29, 34, 36, 42} {
				_, err := tier.Raw(t.Context(), alg.Script, []string{state}, strings.Repeat("\x01", size))
				errorIs(t, err, sluice.ErrInvalidLimit, "%d packed bytes", size)
			}
		}
		_, found, err := tier.Get(t.Context(), state)
		noError(t, err)
		isFalse(t, found, "nothing written")
	})

	t.Run("random sequences match the in-process model, and retries are honest", func(t *testing.T) {
		tier, clock, got, key := setup(t)
		mem, err := memstore.New()
		noError(t, err)
		want, err := alg.New(mem, clock)
		noError(t, err)
		rng := newRand(t)
		ctx := t.Context()
		for i := range 300 {
			limit := alg.Limits[rng.IntN(len(alg.Limits))]
			k := key + ":" + strconv.Itoa(rng.IntN(3))
			clock.Advance(time.Duration(rng.Int64N(int64(400*time.Millisecond))) - 20*time.Millisecond)
			var g, w sluice.Decision
			var gErr, wErr error
			switch op := rng.IntN(20); {
			case op == 0:
				noError(t, got.Reset(ctx, k))
				noError(t, want.Reset(ctx, k))
				continue
			case op <= 2:
				n := 1 + rng.Int64N(alg.Capacity(limit))
				g, gErr = got.Refund(ctx, k, limit, n)
				w, wErr = want.Refund(ctx, k, limit, n)
			default:
				n := rng.Int64N(alg.Capacity(limit) + 1)
				g, gErr = got.AllowN(ctx, k, limit, n)
				w, wErr = want.AllowN(ctx, k, limit, n)
				if gErr == nil && !g.Allowed && rng.IntN(3) == 0 {
					// Honest RetryAfter: the same request, exactly then,
					// with nothing else in between, is allowed.
					clock.Advance(g.RetryAfter)
					g, gErr = got.AllowN(ctx, k, limit, n)
					w, wErr = want.AllowN(ctx, k, limit, n)
					noError(t, gErr)
					isTrue(t, g.Allowed, "%s: step %d: retry at RetryAfter denied", tier.Name, i)
				}
			}
			noError(t, gErr, "step %d", i)
			noError(t, wErr, "step %d", i)
			equal(t, w, g, "%s: step %d", tier.Name, i)
		}
	})
}
