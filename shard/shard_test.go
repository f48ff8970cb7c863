package shard_test

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/fixedwindow"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/lease"
	"github.com/sluicehq/sluice/shard"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/builtins"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/memstore"
	"github.com/sluicehq/sluice/store/rueidisstore"
)

func TestMain(m *testing.M) { builtins.Main(m) }

// newMemStore returns memstore.New(opts...), failing t on an error.
func newMemStore(t testing.TB, opts ...memstore.Option) *memstore.Store {
	t.Helper()
	s, err := memstore.New(opts...)
	require.NoError(t, err)
	return s
}

// bucket is a token bucket on the in-process store, on a fake clock that
// only moves when told.
type bucket struct {
	tb    *tokenbucket.Limiter
	store *memstore.Store
	runs  *sluicetest.CountingStore
	clock *sluicetest.FakeClock
}

func newBucket(t *testing.T) bucket {
	t.Helper()
	clock := sluicetest.NewFakeClock(sluicetest.Epoch)
	store := newMemStore(t, memstore.WithClock(clock))
	runs := &sluicetest.CountingStore{Store: store}
	tb, err := tokenbucket.New(runs, tokenbucket.WithClock(clock))
	require.NoError(t, err)
	return bucket{tb: tb, store: store, runs: runs, clock: clock}
}

// has reports whether the store holds a token bucket at key.
func (b bucket) has(key string) bool {
	_, found := b.store.Value(key + tokenbucket.KeySuffix)
	return found
}

// remaining peeks share i of s of key directly, bypassing the shard.
func (b bucket) remaining(t *testing.T, key string, limit sluice.Limit, s, i int) int64 {
	t.Helper()
	d, err := b.tb.AllowN(t.Context(), shard.SubKey(key, i, s), shard.Share(limit, s, i), 0)
	require.NoError(t, err)
	return d.Remaining
}

func newShard(t *testing.T, next sluice.Limiter, opts ...shard.Option) *shard.Limiter {
	t.Helper()
	l, err := shard.New(next, opts...)
	require.NoError(t, err)
	return l
}

// as returns l's implementation of the optional interface T, found with
// sluice.As, and requires that there is one.
func as[T any](t *testing.T, l sluice.Limiter) T {
	t.Helper()
	v, ok := sluice.As[T](l)
	require.True(t, ok, "%T serves %s", l, reflect.TypeFor[T]())
	return v
}

func TestSharesAddUpExactly(t *testing.T) {
	for _, limit := range []sluice.Limit{
		{Rate: 100, Period: time.Second, Burst: 10},
		{Rate: 7, Period: time.Second, Burst: 5},
		{Rate: 1000, Period: time.Minute, Burst: 1001},
	} {
		for _, s := range []int{1, 2, 3, 4, 6, 64} {
			n := shard.Count(limit, s)
			require.LessOrEqual(t, n, s)
			var rate, burst int64
			for i := range n {
				share := shard.Share(limit, n, i)
				require.NoError(t, share.Validate())
				require.Equal(t, limit.Period, share.Period)
				rate += share.Rate
				burst += share.Burst
			}
			require.Equal(t, limit.Rate, rate, "%s in %d shares", limit, n)
			require.Equal(t, limit.Burst, burst, "%s in %d shares", limit, n)
		}
	}
}

// trickyKeys are keys whose sub-keys could collide under a careless
// escaping: with and without hash tags, empty tags, braces, '#' and '%'
// where the sub-key's own syntax uses them.
var trickyKeys = []string{
	"x", "{x}", "#x", "{#x}", "x#0.1", "{x#0.1}", "{x}#0.1", "x%23", "{x%23}", "x#", "{x#}",
	"", "{", "}", "{}", "{}{x}", "x{}", "}{#%", "{{x}", "{{x}}", "{x}}", "a{b", "a{b}c", "a{}b",
	"%", "#", "{%}", "{#}", "{%23}", "{%7B}", "tenant:42", "{tenant:42}",
	sluice.Key("tenant:hot", "api"), sluice.Key("tenant:hot", "web"), sluice.Key("tenant:hot"),
	sluice.Key("tenant:hot#0.1", "api"), sluice.Key("a{b}"), sluice.Key(""), sluice.Key("%"),
	sluice.Key("x"), sluice.Key("x", "y"), "rl:{x}:y", "rl:{}:y", "rl:{x:y}", "rl:{x}:{y}",
}

func TestSubKeysSpreadOverTheSlotRange(t *testing.T) {
	for _, key := range trickyKeys {
		for _, s := range []int{1, 2, 3, 6, 64} {
			for i, k := range shard.SubKeys(key, s) {
				width := 16384 / s
				slot := ext.HashSlot(k)
				require.GreaterOrEqual(t, slot, i*width+width/2-width/8, "%q share %d of %d", key, i, s)
				require.LessOrEqual(t, slot, i*width+width/2+width/8, "%q share %d of %d", key, i, s)
			}
		}
	}
}

// TestSubKeysNeverCollide: across the tricky keys, every share count and
// every share, two sub-keys are equal only for the same key and share
// (share i of S and of S' may be the same key), and no sub-key is a key
// whose hash tag holds no '#'.
func TestSubKeysNeverCollide(t *testing.T) {
	type owner struct {
		key   string
		share int
	}
	seen := map[string]owner{}
	plain := map[string]bool{}
	for _, key := range trickyKeys {
		if !strings.Contains(key, "#") {
			plain[key] = true
		}
	}
	for _, key := range trickyKeys {
		for _, s := range []int{1, 2, 3, 4, 8, 64} {
			for i, k := range shard.SubKeys(key, s) {
				if o, ok := seen[k]; ok {
					require.Equal(t, owner{key, i}, o, "%q is the sub-key of both %q share %d and %q share %d", k, o.key, o.share, key, i)
				}
				seen[k] = owner{key, i}
				require.False(t, plain[k], "sub-key %q of %q is a user's key", k, key)
				require.NotEqual(t, key, k)
			}
		}
	}
}

// TestSubKeyKeepsTheKeysShape: the examples of the package documentation,
// and escaping.
func TestSubKeyKeepsTheKeysShape(t *testing.T) {
	for _, c := range []struct {
		key  string
		i, s int
		want string
	}{
		{sluice.Key("tenant:hot", "api"), 6, 8, "rl:{tenant:hot#6.41}:api"},
		{"tenant:42", 6, 8, "{#tenant:42#6.53}"},
		{sluice.Key("a#b", "x"), 0, 2, "rl:{a%23b#0.1}:x"},
		{"a{b", 0, 2, "{#a%7Bb#0.2}"},
		{sluice.Key("50%", "x"), 1, 2, "rl:{50%2525#1.22}:x"},
	} {
		require.Equal(t, c.want, shard.SubKey(c.key, c.i, c.s), "share %d of %d of %q", c.i, c.s, c.key)
	}
	// The shape in general: only the tag changes.
	for i, k := range shard.SubKeys(sluice.Key("tenant:hot", "api", "v1"), 6) {
		require.Regexp(t, `^rl:\{tenant:hot#`+strconv.Itoa(i)+`\.[0-9]+\}:api:v1$`, k)
	}
}

func TestWithHotKeysTakesTheCallersKey(t *testing.T) {
	b := newBucket(t)
	l := newShard(t, b.tb, shard.WithHotKeys("tenant:42", "a{b}", "50%", "rl:{tenant:7}:api"))
	for key, want := range map[string]bool{
		sluice.Key("tenant:42", "api"):      true,
		sluice.Key("tenant:42", "web", "x"): true,
		sluice.Key("tenant:42"):             true,
		"tenant:42":                         true, // exactly
		"x{tenant:42}y":                     true, // the tag
		sluice.Key("tenant:43", "api"):      false,
		sluice.Key("tenant:4", "2"):         false,
		sluice.Key("tenant:42:api"):         false,
		"tenant:42:api":                     false,
		"{tenant:4}2":                       false,
		sluice.Key("a{b}", "x"):             true, // tag a%7Bb%7D
		"rl:{a{b}:x":                        false,
		sluice.Key("50%", "x"):              true, // tag 50%25
		"rl:{50%}:x":                        false,
		"rl:{tenant:7}:api":                 true, // a stored key, exactly
		sluice.Key("tenant:7", "web"):       false,
	} {
		require.Equal(t, want, l.Sharded(key), "%q", key)
	}

	limit := sluice.PerSecond(40)
	hot, cold := sluice.Key("tenant:42", "api"), sluice.Key("tenant:43", "api")
	for _, key := range []string{hot, cold} {
		_, err := l.AllowN(t.Context(), key, limit, 1)
		require.NoError(t, err)
	}
	require.False(t, b.has(hot), "a sharded key is not stored whole")
	found := 0
	for _, k := range shard.SubKeys(hot, shard.DefaultShards) {
		if b.has(k) {
			found++
		}
	}
	require.Equal(t, 1, found, "one share took the request")
	require.True(t, b.has(cold), "another tenant's key is decided whole")

	// With a predicate too, either chooses.
	l = newShard(t, b.tb, shard.WithHotKeys("tenant:42"), shard.WithPredicate(func(k string) bool { return k == "p" }))
	require.True(t, l.Sharded("p"))
	require.True(t, l.Sharded(hot))
	require.False(t, l.Sharded(cold))
	// By default, every key.
	require.True(t, newShard(t, b.tb).Sharded(cold))
}

func TestOptionsAndNewRefuseBadInput(t *testing.T) {
	_, err := shard.New(nil)
	require.ErrorContains(t, err, "shard")
	b := newBucket(t)
	for _, c := range []struct {
		opts []shard.Option
		want string
	}{
		{[]shard.Option{shard.WithShards(2), nil}, "shard: option 1 is nil"},
		{[]shard.Option{shard.WithShards(0)}, "shard: WithShards(0): must be between 1 and 64"},
		{[]shard.Option{shard.WithShards(shard.MaxShards + 1)}, "shard: WithShards(65): must be between 1 and 64"},
		{[]shard.Option{shard.WithPredicate(nil)}, "shard: WithPredicate(nil)"},
		{[]shard.Option{shard.WithHotKeys()}, "shard: WithHotKeys(): give at least one key"},
		{[]shard.Option{shard.WithHotKeys("a", "")}, `shard: WithHotKeys("a", ""): key 1`},
	} {
		_, err := shard.New(b.tb, c.opts...)
		require.ErrorContains(t, err, c.want)
	}
	_, err = shard.New(b.tb, shard.WithHotKeys(""))
	require.ErrorIs(t, err, sluice.ErrInvalidKey)
}

func TestShardedLimitHoldsAndColdKeysPassThrough(t *testing.T) {
	b := newBucket(t)
	l := newShard(t, b.tb, shard.WithShards(4), shard.WithHotKeys("hot"))
	limit := sluice.Limit{Rate: 100, Period: time.Second, Burst: 40}
	allowed := 0
	for range 1000 {
		d, err := l.AllowN(t.Context(), "hot", limit, 1)
		require.NoError(t, err)
		if d.Allowed {
			allowed++
		}
	}
	require.LessOrEqual(t, allowed, 40, "together, the shares allow at most the burst")
	require.GreaterOrEqual(t, allowed, 36, "two tries per request leave little unused")

	d, err := l.AllowN(t.Context(), "cold", limit, 1)
	require.NoError(t, err)
	require.Equal(t, limit, d.Limit, "a cold key is decided whole")
	require.False(t, d.Estimated)
	require.True(t, b.has("cold"), "under its own key")
}

func TestAllowNChecksBeforeCallingTheStore(t *testing.T) {
	b := newBucket(t)
	l := newShard(t, b.tb)
	limit := sluice.Limit{Rate: 100, Period: time.Second, Burst: 40}
	for _, c := range []struct {
		key   string
		limit sluice.Limit
		n     int64
		want  error
	}{
		{"", limit, 1, sluice.ErrInvalidKey},
		{"k", sluice.Limit{}, 1, sluice.ErrInvalidLimit},
		{"k", limit, -1, sluice.ErrInvalidCost},
		{"k", limit, 11, sluice.ErrCostExceedsBurst}, // one share holds 10
		// Valid for Limit.Validate, but the token bucket refuses its
		// shares: 150,000/s is one token per 6.7 µs, 5% off whole
		// microseconds.
		{"k", sluice.PerSecond(600_000), 1, sluice.ErrInvalidLimit},
	} {
		_, err := l.AllowN(t.Context(), c.key, c.limit, c.n)
		require.ErrorIs(t, err, c.want, "%q %s cost %d", c.key, c.limit, c.n)
		require.ErrorContains(t, err, "shard")
	}
	require.Zero(t, b.runs.Runs.Load(), "nothing reached the store")

	d, err := l.AllowN(t.Context(), "k", limit, 10)
	require.NoError(t, err, "a cost of one share's burst is valid")
	require.True(t, d.Allowed)

	// 30,000/s is refused whole (33.3 µs per token) but its three shares
	// of 10,000/s are exact: sharding makes it enforceable.
	high := sluice.PerSecond(30_000)
	_, err = b.tb.AllowN(t.Context(), "k2", high, 1)
	require.ErrorIs(t, err, sluice.ErrInvalidLimit)
	d, err = newShard(t, b.tb, shard.WithShards(3)).AllowN(t.Context(), "k2", high, 1)
	require.NoError(t, err)
	require.True(t, d.Allowed)
}

// TestDecisionIsAboutTheWholeLimit: under shard, Limit is the caller's,
// Remaining an estimate of what the whole limit has left (marked
// Estimated), close to the truth after k admissions on a fresh key.
func TestDecisionIsAboutTheWholeLimit(t *testing.T) {
	b := newBucket(t)
	l := newShard(t, b.tb, shard.WithShards(4))
	limit := sluice.Limit{Rate: 400, Period: time.Second, Burst: 400}
	key := "fresh"
	const k = 100
	var last sluice.Decision
	for range k {
		d, err := l.AllowN(t.Context(), key, limit, 1)
		require.NoError(t, err)
		require.True(t, d.Allowed)
		last = d
	}
	require.Equal(t, limit, last.Limit, "the caller's limit, not the share's")
	require.True(t, last.Estimated)
	// The truth is 300; one share's count is Binomial(100, 1/4), so the
	// share's figure times 4 is 300 ± 17 (one standard deviation).
	require.InDelta(t, 300, last.Remaining, 80)
	// Refilling 100 tokens at 400/s takes 250 ms; one share's deficit at
	// its 100/s, 250 ms ± 43 ms.
	require.InDelta(t, 250*time.Millisecond, last.ResetAfter, float64(200*time.Millisecond))

	// Peeks land on random shares: on average, their estimate is the
	// truth, as the shares' Remainings add up to it.
	var sum int64
	const peeks = 400
	for range peeks {
		d, err := l.AllowN(t.Context(), key, limit, 0)
		require.NoError(t, err)
		require.LessOrEqual(t, d.Remaining, limit.Burst)
		sum += d.Remaining
	}
	require.InDelta(t, 300, float64(sum)/peeks, 15)

	// Unequal shares (3, 3, 2, 2) are scaled by their own size: a fresh
	// key reads as full whichever share answers.
	small := sluice.Limit{Rate: 10, Period: time.Second, Burst: 10}
	for range 20 {
		d, err := l.AllowN(t.Context(), "small", small, 0)
		require.NoError(t, err)
		require.Equal(t, int64(10), d.Remaining)
	}

	// A denial: nothing left anywhere, an honest RetryAfter.
	tiny := sluice.Limit{Rate: 4, Period: time.Second, Burst: 4}
	for range 4 {
		_, err := l.AllowN(t.Context(), "tiny", tiny, 1)
		require.NoError(t, err)
	}
	var denied sluice.Decision
	for range 10 { // the four tokens may not all have been taken yet
		d, err := l.AllowN(t.Context(), "tiny", tiny, 1)
		require.NoError(t, err)
		if !d.Allowed {
			denied = d
			break
		}
	}
	require.False(t, denied.Allowed)
	require.Equal(t, tiny, denied.Limit)
	require.Zero(t, denied.Remaining)
	require.Positive(t, denied.RetryAfter)
	require.LessOrEqual(t, denied.RetryAfter, time.Second, "a share refills one token per second")

	// One share is the whole: exact.
	one := newShard(t, b.tb, shard.WithShards(1))
	for i := range 5 {
		d, err := one.AllowN(t.Context(), "one", limit, 1)
		require.NoError(t, err)
		require.False(t, d.Estimated)
		require.Equal(t, limit.Burst-int64(i)-1, d.Remaining)
	}
}

func TestCapacity(t *testing.T) {
	b := newBucket(t)
	l := newShard(t, b.tb, shard.WithShards(4))
	for _, c := range []struct {
		limit sluice.Limit
		want  int64
	}{
		{sluice.Limit{Rate: 100, Period: time.Second, Burst: 40}, 10},
		{sluice.Limit{Rate: 100, Period: time.Second, Burst: 10}, 2}, // shares 3, 3, 2, 2
		{sluice.Limit{Rate: 100, Period: time.Second, Burst: 3}, 1},  // three shares of one
	} {
		got, err := l.Capacity("k", c.limit)
		require.NoError(t, err)
		require.Equal(t, c.want, got, "%s", c.limit)
		// The capacity is what AllowN takes: CheckRequest agrees.
		require.NoError(t, ext.CheckRequest(l, "k", c.limit, got))
		require.ErrorIs(t, ext.CheckRequest(l, "k", c.limit, got+1), sluice.ErrCostExceedsBurst)
		_, err = l.AllowN(t.Context(), "k", c.limit, got+1)
		require.ErrorIs(t, err, sluice.ErrCostExceedsBurst)
	}
	_, err := l.Capacity("k", sluice.PerSecond(600_000))
	require.ErrorIs(t, err, sluice.ErrInvalidLimit, "a share the token bucket refuses")

	// The window algorithms' capacity is the rate: a share's rate.
	fw, err := fixedwindow.New(newMemStore(t))
	require.NoError(t, err)
	got, err := newShard(t, fw, shard.WithShards(4)).Capacity("k", sluice.Limit{Rate: 40, Period: time.Second, Burst: 1000})
	require.NoError(t, err)
	require.Equal(t, int64(10), got)

	// With hot keys, Capacity answers for the key asked about.
	hot := newShard(t, b.tb, shard.WithShards(4), shard.WithHotKeys("hot"))
	limit := sluice.Limit{Rate: 100, Period: time.Second, Burst: 40}
	got, err = hot.Capacity("hot", limit)
	require.NoError(t, err)
	require.Equal(t, int64(10), got)
	got, err = hot.Capacity("cold", limit)
	require.NoError(t, err)
	require.Equal(t, int64(40), got)
	_, err = hot.Capacity("cold", sluice.PerSecond(30_000))
	require.ErrorIs(t, err, sluice.ErrInvalidLimit, "the token bucket refuses it whole")
	got, err = hot.Capacity("hot", sluice.PerSecond(30_000))
	require.NoError(t, err, "but not in four shares of 7,500/s")
	require.Equal(t, int64(7500), got)
}

// TestRefundGoesToTheShareThatIsShort: a refund fills the share furthest
// below its capacity, and splits when it is more than that share lacks.
func TestRefundGoesToTheShareThatIsShort(t *testing.T) {
	b := newBucket(t)
	l := newShard(t, b.tb, shard.WithShards(4))
	limit := sluice.Limit{Rate: 40, Period: time.Second, Burst: 40} // shares of 10
	key := "refund"
	spend := func(i int, n int64) {
		d, err := b.tb.AllowN(t.Context(), shard.SubKey(key, i, 4), shard.Share(limit, 4, i), n)
		require.NoError(t, err)
		require.True(t, d.Allowed)
	}
	spend(0, 2)
	spend(2, 7)

	r := as[sluice.Refunder](t, l)
	d, err := r.Refund(t.Context(), key, limit, 5)
	require.NoError(t, err)
	require.Equal(t, []int64{8, 10, 8, 10}, remainings(t, b, key, limit), "all five to share 2, the shortest")
	require.True(t, d.Allowed)
	require.Equal(t, limit, d.Limit)
	require.True(t, d.Estimated)
	require.Equal(t, int64(36), d.Remaining, "what the shares have left together")

	spend(1, 6)
	_, err = r.Refund(t.Context(), key, limit, 7)
	require.NoError(t, err)
	require.Equal(t, []int64{9, 10, 8, 10}, remainings(t, b, key, limit), "six to share 1, the one left to share 0 (short of 2, as share 2)")

	d, err = r.Refund(t.Context(), key, limit, 40)
	require.NoError(t, err, "a refund of the whole capacity is valid")
	require.Equal(t, []int64{10, 10, 10, 10}, remainings(t, b, key, limit))
	require.Equal(t, int64(40), d.Remaining)

	_, err = r.Refund(t.Context(), key, limit, 41)
	require.ErrorIs(t, err, sluice.ErrCostExceedsBurst)
	_, err = r.Refund(t.Context(), key, limit, 0)
	require.ErrorIs(t, err, sluice.ErrInvalidCost)

	// A key that is not sharded is refunded whole.
	cold := newShard(t, b.tb, shard.WithHotKeys("other"))
	_, err = cold.AllowN(t.Context(), "cold", limit, 30)
	require.NoError(t, err)
	d, err = as[sluice.Refunder](t, cold).Refund(t.Context(), "cold", limit, 20)
	require.NoError(t, err)
	require.Equal(t, int64(30), d.Remaining)
	require.False(t, d.Estimated)
}

// remainings peeks every share of key, split 4 ways.
func remainings(t *testing.T, b bucket, key string, limit sluice.Limit) []int64 {
	t.Helper()
	out := make([]int64, 4)
	for i := range out {
		out[i] = b.remaining(t, key, limit, 4, i)
	}
	return out
}

func TestResetForgetsEveryShare(t *testing.T) {
	b := newBucket(t)
	l := newShard(t, b.tb, shard.WithShards(4))
	key := "reset"
	// State under four shares, three (a limit of burst 3), and the whole
	// key, as before it was sharded.
	for _, limit := range []sluice.Limit{sluice.PerSecond(40), sluice.PerSecond(3)} {
		for range 20 {
			_, err := l.AllowN(t.Context(), key, limit, 1)
			require.NoError(t, err)
		}
	}
	_, err := b.tb.AllowN(t.Context(), key, sluice.PerSecond(40), 1)
	require.NoError(t, err)
	_, err = b.tb.AllowN(t.Context(), "other", sluice.PerSecond(40), 1)
	require.NoError(t, err)
	require.Greater(t, b.store.Len(), 5)

	require.NoError(t, as[sluice.Resetter](t, l).Reset(t.Context(), key))
	require.Equal(t, 1, b.store.Len(), "only the other key is left")
	require.True(t, b.has("other"))
	require.Equal(t, []int64{10, 10, 10, 10}, remainings(t, b, key, sluice.PerSecond(40)))

	require.ErrorIs(t, as[sluice.Resetter](t, l).Reset(t.Context(), ""), sluice.ErrInvalidKey)
	// A key that is not sharded is reset whole.
	require.NoError(t, as[sluice.Resetter](t, newShard(t, b.tb, shard.WithHotKeys("x"))).Reset(t.Context(), "other"))
	require.Zero(t, b.store.Len())
}

func TestAllowBatchRoutesEachRequestAsAllowN(t *testing.T) {
	b := newBucket(t)
	l := newShard(t, b.tb, shard.WithShards(4), shard.WithHotKeys("hot"))
	limit := sluice.Limit{Rate: 40, Period: time.Second, Burst: 40}
	reqs := []sluice.Request{{Key: "cold", Limit: limit, N: 3}}
	for range 60 {
		reqs = append(reqs, sluice.Request{Key: "hot", Limit: limit, N: 1})
	}
	reqs = append(reqs, sluice.Request{Key: "cold", Limit: limit, N: 5})
	batch := as[sluice.BatchLimiter](t, l)
	results, err := batch.AllowBatch(t.Context(), reqs)
	require.NoError(t, err)
	require.Len(t, results, len(reqs))
	allowed := 0
	for i, r := range results {
		require.NoError(t, r.Err)
		require.Equal(t, limit, r.Decision.Limit, "request %d", i)
		require.Equal(t, reqs[i].Key == "hot", r.Decision.Estimated, "request %d", i)
		if reqs[i].Key == "hot" && r.Decision.Allowed {
			allowed++
		}
	}
	require.Equal(t, int64(37), results[0].Decision.Remaining, "the cold key, in order")
	require.Equal(t, int64(32), results[len(results)-1].Decision.Remaining)
	require.LessOrEqual(t, allowed, 40, "together, the shares allow at most the burst")
	require.GreaterOrEqual(t, allowed, 34, "denied requests try a second share")
	require.False(t, b.has("hot"))
	require.True(t, b.has(shard.SubKey("hot", 0, 4)))

	// An invalid request is refused by its index in the caller's batch,
	// before anything is decided.
	before := b.runs.Runs.Load()
	for _, c := range []struct {
		bad  sluice.Request
		want error
	}{
		{sluice.Request{Key: "hot", Limit: limit, N: 11}, sluice.ErrCostExceedsBurst},
		{sluice.Request{Key: "cold", Limit: limit, N: 41}, sluice.ErrCostExceedsBurst},
		{sluice.Request{Key: "", Limit: limit, N: 1}, sluice.ErrInvalidKey},
		{sluice.Request{Key: "hot", Limit: sluice.PerSecond(600_000), N: 1}, sluice.ErrInvalidLimit},
	} {
		_, err := batch.AllowBatch(t.Context(), []sluice.Request{reqs[0], reqs[1], c.bad, reqs[1]})
		var reqErr *sluice.RequestError
		require.ErrorAs(t, err, &reqErr)
		require.Equal(t, 2, reqErr.Index)
		require.ErrorIs(t, err, c.want)
	}
	require.Equal(t, before, b.runs.Runs.Load(), "nothing was sent")
	_, err = batch.AllowBatch(t.Context(), nil)
	require.Error(t, err)
}

// crossSlotStore refuses, as a Redis Cluster does, a call whose keys hash
// to different slots.
type crossSlotStore struct {
	sluice.Store
	refused atomic.Int64
}

func (s *crossSlotStore) Run(ctx context.Context, script *sluice.Script, keys []string, args []int64) ([]int64, error) {
	for _, k := range keys {
		if ext.HashSlot(k) != ext.HashSlot(keys[0]) {
			s.refused.Add(1)
			return nil, fmt.Errorf("crossslot: %w", sluice.ErrCrossSlot)
		}
	}
	return s.Store.Run(ctx, script, keys, args)
}

// TestAllowBatchOnACluster: the sub-keys of one key are in different
// slots; a batch is split by hash tag once the store says so.
func TestAllowBatchOnACluster(t *testing.T) {
	clock := sluicetest.NewFakeClock(sluicetest.Epoch)
	store := &crossSlotStore{Store: newMemStore(t, memstore.WithClock(clock))}
	tb, err := tokenbucket.New(store, tokenbucket.WithClock(clock))
	require.NoError(t, err)
	batch := as[sluice.BatchLimiter](t, newShard(t, tb, shard.WithShards(4)))
	// Room for every request. The first batch finds out that the store is
	// a Cluster; the others are grouped by hash tag from the start.
	limit := sluice.Limit{Rate: 400, Period: time.Second, Burst: 400}
	for range 3 {
		var reqs []sluice.Request
		for i := range 30 {
			reqs = append(reqs, sluice.Request{Key: sluice.Key("t", strconv.Itoa(i%3)), Limit: limit, N: 1})
		}
		results, err := batch.AllowBatch(t.Context(), reqs)
		require.NoError(t, err)
		require.Len(t, results, len(reqs))
		for _, r := range results {
			require.NoError(t, r.Err)
			require.True(t, r.Decision.Allowed)
			require.Equal(t, limit, r.Decision.Limit)
		}
	}
	require.Equal(t, int64(1), store.refused.Load(), "the first batch found out")
}

// resetOnly serves the token bucket's AllowN and Reset, and no other
// method.
type resetOnly struct{ tb *tokenbucket.Limiter }

func (r resetOnly) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	return r.tb.AllowN(ctx, key, limit, n)
}

func (r resetOnly) Reset(ctx context.Context, key string) error { return r.tb.Reset(ctx, key) }

// requireNotClaimed requires that l's own type implements exactly what it always
// serves (bound): every other optional interface it serves only through
// sluice.As, when the limiter it wraps does.
func requireNotClaimed(t *testing.T, l sluice.Limiter) {
	t.Helper()
	require.Equal(t, []string{"bound"}, sluicetest.OwnCapabilities(l), "%T", l)
}

// withBound is what a shard over a limiter serving next serves: the same,
// and Capacity, which a shard serves itself (from the wrapped limiter's
// capacity, or the limit's burst), in Capabilities' order.
func withBound(next []string) []string {
	var out []string
	for _, name := range []string{"refund", "reset", "batch", "bound", "lease"} {
		if name == "bound" || slices.Contains(next, name) {
			out = append(out, name)
		}
	}
	return out
}

func TestCapabilitiesAreThoseOfNext(t *testing.T) {
	full := newBucket(t)
	over := newShard(t, full.tb)
	requireNotClaimed(t, over)
	require.Equal(t, []string{"refund", "reset", "batch", "bound", "lease", "leasebatch"}, sluicetest.Capabilities(t, full.tb))
	require.Equal(t, []string{"refund", "reset", "batch", "bound", "lease"}, sluicetest.Capabilities(t, over),
		"what the token bucket serves, but batches of leases (a shard leases one request at a time)")
	_, ok := sluice.As[ext.LeaseBatcher](over)
	require.False(t, ok)

	b := newBucket(t)
	limit := sluice.PerSecond(40)
	for _, c := range []struct {
		next sluice.Limiter
		want []string // what next serves
	}{
		{sluicetest.AllowOnly{Next: b.tb}, nil},
		{resetOnly{b.tb}, []string{"reset"}},
	} {
		require.Equal(t, c.want, sluicetest.Capabilities(t, c.next))
		for _, opts := range [][]shard.Option{nil, {shard.WithHotKeys("other")}} { // sharded and not
			l := newShard(t, c.next, opts...)
			requireNotClaimed(t, l)
			require.Equal(t, withBound(c.want), sluicetest.Capabilities(t, l), "%T: what the wrapped limiter serves, and Capacity", c.next)
			_, ok := sluice.As[sluice.Refunder](l)
			require.False(t, ok, "no refunds over a limiter without them")
			_, ok = sluice.As[sluice.BatchLimiter](l)
			require.False(t, ok, "no batches over a limiter without them")
			_, ok = sluice.As[ext.Leaser](l)
			require.False(t, ok, "no leases over a limiter without them")
			rs, ok := sluice.As[sluice.Resetter](l)
			require.Equal(t, slices.Contains(c.want, "reset"), ok, "resets exactly over a limiter with them")
			if ok {
				require.NoError(t, rs.Reset(t.Context(), "k"))
			}
			// Capacity works whatever next serves: the limit's burst, a
			// share's for a sharded key.
			got, err := l.Capacity("k", limit)
			require.NoError(t, err)
			if l.Sharded("k") {
				require.Equal(t, int64(10), got)
			} else {
				require.Equal(t, limit.Burst, got)
			}
			// AllowN works whatever next serves.
			d, err := l.AllowN(t.Context(), "k", limit, 1)
			require.NoError(t, err)
			require.True(t, d.Allowed)
		}
	}
	require.Zero(t, b.store.Len()-2, "only the AllowN calls reached the store: the key and one share")
}

func TestLeaseRoutesAHolderToOneShare(t *testing.T) {
	b := newBucket(t)
	// f records the leases and releases it is asked for, and answers as a
	// limit with nothing reserved would.
	f := &sluicetest.RecordingLeaser{Next: b.tb, FullLimit: true}
	lastLease := func() ext.LeaseRequest { leases := f.Leases(); return leases[len(leases)-1] }
	lastRelease := func() sluicetest.ReleaseCall { releases := f.Releases(); return releases[len(releases)-1] }
	l := as[ext.Leaser](t, newShard(t, f, shard.WithShards(4), shard.WithHotKeys("hot")))
	limit := sluice.Limit{Rate: 400, Period: time.Second, Burst: 400}
	used := map[int]bool{}
	for holder := int64(1); holder <= 100; holder++ {
		i := shard.HolderShare(holder, 4)
		used[i] = true
		for range 2 { // the same share every time
			g, err := l.Lease(t.Context(), ext.LeaseRequest{Key: "hot", Limit: limit, Holder: holder, Cost: 1, Extra: 9, Hold: time.Second})
			require.NoError(t, err)
			got := lastLease()
			require.Equal(t, shard.SubKey("hot", i, 4), got.Key)
			require.Equal(t, shard.Share(limit, 4, i), got.Limit)
			require.Equal(t, holder, got.Holder)
			require.Equal(t, int64(9), g.Extra)
			require.Equal(t, limit, g.Decision.Limit, "the grant is about the whole limit")
			require.True(t, g.Decision.Estimated)
			require.Equal(t, int64(4*90), g.Decision.Remaining, "the share's 90 left, times 4")
		}
		d, err := l.Release(t.Context(), "hot", limit, holder, 5)
		require.NoError(t, err)
		require.Equal(t, sluicetest.ReleaseCall{Key: shard.SubKey("hot", i, 4), Limit: shard.Share(limit, 4, i), Holder: holder, Unspent: 5}, lastRelease(),
			"the release goes where the lease went")
		require.Equal(t, limit, d.Limit)
		require.Equal(t, limit.Burst, d.Remaining)
	}
	require.Len(t, used, 4, "holders spread over the shares")

	leases := len(f.Leases())
	_, err := l.Lease(t.Context(), ext.LeaseRequest{Key: "hot", Limit: limit, Holder: 1, Cost: 101, Hold: time.Second})
	require.ErrorIs(t, err, sluice.ErrCostExceedsBurst, "a cost must fit one share")
	require.Len(t, f.Leases(), leases, "and is refused before asking")

	// A key that is not sharded is leased whole.
	g, err := l.Lease(t.Context(), ext.LeaseRequest{Key: "cold", Limit: limit, Holder: 1, Cost: 1, Extra: 9, Hold: time.Second})
	require.NoError(t, err)
	require.Equal(t, "cold", lastLease().Key)
	require.Equal(t, limit, lastLease().Limit)
	require.Equal(t, int64(390), g.Decision.Remaining)
	require.False(t, g.Decision.Estimated)
	_, err = l.Release(t.Context(), "cold", limit, 1, 0)
	require.NoError(t, err)
	require.Equal(t, sluicetest.ReleaseCall{Key: "cold", Limit: limit, Holder: 1, Unspent: 0}, lastRelease())
}

// TestLeaseOnTheTokenBucket: a holder's reservation lands on its share's
// sub-key, and its release finds it there.
func TestLeaseOnTheTokenBucket(t *testing.T) {
	b := newBucket(t)
	l := as[ext.Leaser](t, newShard(t, b.tb, shard.WithShards(4)))
	limit := sluice.Limit{Rate: 40, Period: time.Minute, Burst: 40} // shares of 10
	const holder = 7
	i := shard.HolderShare(holder, 4)
	sub, share := shard.SubKey("hot", i, 4), shard.Share(limit, 4, i)
	// What the share has left for others, reservations excluded.
	left := func() int64 {
		g, err := b.tb.Lease(t.Context(), ext.LeaseRequest{Key: sub, Limit: share, Holder: 99, Hold: time.Second})
		require.NoError(t, err)
		return g.Decision.Remaining
	}

	g, err := l.Lease(t.Context(), ext.LeaseRequest{Key: "hot", Limit: limit, Holder: holder, Cost: 1, Extra: 4, Hold: time.Second})
	require.NoError(t, err)
	require.True(t, g.Decision.Allowed)
	require.Equal(t, int64(2), g.Extra, "a quarter of the share's 9 left after the cost")
	require.Equal(t, limit, g.Decision.Limit)
	require.True(t, g.Decision.Estimated)
	require.Equal(t, int64(28), g.Decision.Remaining, "the share's 7 left, times 4")
	require.Equal(t, int64(7), left(), "one spent and two reserved on the holder's share")

	d, err := l.Release(t.Context(), "hot", limit, holder, 2)
	require.NoError(t, err)
	require.Equal(t, limit, d.Limit)
	require.Equal(t, int64(36), d.Remaining, "the share's 9 left, times 4")
	require.Equal(t, int64(9), left(), "the release reached the reservation")
}

// TestUnderTheLeaseDecorator: lease.New over a shard works, and a process
// (one holder) leases from one share: alone, it gets that share's part of
// the limit.
func TestUnderTheLeaseDecorator(t *testing.T) {
	b := newBucket(t)
	leased, err := lease.New(newShard(t, b.tb, shard.WithShards(4)), lease.WithSize(3))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, leased.Close()) })
	limit := sluice.Limit{Rate: 40, Period: time.Hour, Burst: 40} // shares of 10; the clock stands still
	allowed := 0
	for range 100 {
		d, err := leased.AllowN(t.Context(), "hot", limit, 1)
		require.NoError(t, err)
		require.Equal(t, limit, d.Limit)
		if d.Allowed {
			allowed++
		}
	}
	require.LessOrEqual(t, allowed, 10, "one share")
	require.GreaterOrEqual(t, allowed, 8, "most of it")
}

// TestOnCluster: on a real 3-primary Redis Cluster, the S sub-keys of a
// key land on min(S, 3) different primaries; under concurrent load the
// shares together admit at most Burst + Rate × T; batches, refunds and
// resets reach every share across slots.
func TestOnCluster(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cluster.Addrs(), DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(client.Close)
	store, err := rueidisstore.New(client)
	require.NoError(t, err)

	t.Run("sub-keys land on min(S, primaries) nodes", func(t *testing.T) {
		for s := 1; s <= 6; s++ {
			for _, key := range []string{"tenant:42", sluice.Key("tenant:{7}", "api"), sluice.Key("tenant:hot"), ""} {
				nodes := map[string]bool{}
				for _, k := range shard.SubKeys(key, s) {
					slot, err := client.Do(t.Context(), client.B().ClusterKeyslot().Key(k).Build()).AsInt64()
					require.NoError(t, err)
					require.Equal(t, ext.HashSlot(k), int(slot))
					nodes[cluster.NodeForSlot(int(slot)).Addr()] = true
				}
				require.Len(t, nodes, min(s, 3), "key %q in %d shares", key, s)
			}
		}
	})

	tb, err := tokenbucket.New(store)
	require.NoError(t, err)

	t.Run("batches, refunds and resets across slots", func(t *testing.T) {
		l := newShard(t, tb, shard.WithShards(3), shard.WithHotKeys("tenant:hot"))
		resetter := as[sluice.Resetter](t, l)
		limit := sluice.Limit{Rate: 30, Period: time.Hour, Burst: 30} // shares of 10; no refill to speak of
		hot, cold := sluice.Key("tenant:hot", "api"), sluice.Key("tenant:cold", "api")
		t.Cleanup(func() {
			_ = resetter.Reset(context.Background(), hot)
			_ = resetter.Reset(context.Background(), cold)
		})
		var reqs []sluice.Request
		for range 24 {
			reqs = append(reqs, sluice.Request{Key: hot, Limit: limit, N: 1}, sluice.Request{Key: cold, Limit: limit, N: 1})
		}
		results, err := as[sluice.BatchLimiter](t, l).AllowBatch(t.Context(), reqs)
		require.NoError(t, err)
		require.Len(t, results, len(reqs))
		allowedHot := 0
		for i, r := range results {
			require.NoError(t, r.Err)
			require.Equal(t, limit, r.Decision.Limit)
			if reqs[i].Key == hot && r.Decision.Allowed {
				allowedHot++
			}
			if reqs[i].Key == cold {
				require.Equal(t, int64(30-1-i/2), r.Decision.Remaining, "the cold key, in order")
			}
		}
		require.LessOrEqual(t, allowedHot, 24)
		require.GreaterOrEqual(t, allowedHot, 18, "denied requests try a second share")

		peekAll := func() (sum int64) {
			for i, k := range shard.SubKeys(hot, 3) {
				d, err := tb.AllowN(t.Context(), k, shard.Share(limit, 3, i), 0)
				require.NoError(t, err)
				sum += d.Remaining
			}
			return sum
		}
		before := peekAll()
		require.Equal(t, int64(30-allowedHot), before)
		d, err := as[sluice.Refunder](t, l).Refund(t.Context(), hot, limit, 6)
		require.NoError(t, err)
		require.Equal(t, before+6, peekAll(), "the refund reached the shares that were short")
		require.Equal(t, before+6, d.Remaining)

		require.NoError(t, resetter.Reset(t.Context(), hot))
		require.Equal(t, int64(30), peekAll())
	})

	t.Run("the shares admit at most Burst + Rate × T", func(t *testing.T) {
		l := newShard(t, tb, shard.WithShards(3))
		limit := sluice.Limit{Rate: 300, Period: time.Second, Burst: 60}
		key := sluicetest.UniqueKey(t)
		ctx, stop := context.WithTimeout(t.Context(), 2*time.Second)
		defer stop()
		calls := make([][]builtins.Call, 32)
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() {
				for ctx.Err() == nil {
					start := time.Now().UnixNano()
					d, err := l.AllowN(context.Background(), key, limit, 1)
					if err != nil {
						t.Error(err)
						return
					}
					calls[i] = append(calls[i], builtins.Call{Start: start, End: time.Now().UnixNano(), Allowed: d.Allowed})
				}
			})
		}
		wg.Wait()
		all := slices.Concat(calls...)
		slices.SortFunc(all, func(a, b builtins.Call) int { return cmp.Compare(a.Start, b.Start) })
		allowed := float64(len(builtins.Allowed(all)))
		span := builtins.Span(all)
		bound := float64(limit.Burst) + float64(limit.Rate)*span.Seconds()
		// Lower bound: over the time the calls show the shares saturated
		// (a share that has just denied holds under one token, and fills
		// only after (its burst - 1) / its rate without a denial); a loaded
		// machine's stalls leave the refill unclaimed for want of calls.
		share := shard.Share(limit, 3, 0)
		saturated := builtins.Saturated(all, time.Duration(share.Burst-1)*share.Period/time.Duration(share.Rate))
		owed := float64(limit.Burst) + float64(limit.Rate)*saturated.Seconds()
		t.Logf("%.0f allowed in %s, bound %.0f (%.1f%%); saturated %s, owed %.0f", allowed, span, bound, 100*allowed/bound, saturated, owed)
		require.LessOrEqual(t, allowed, bound)
		require.GreaterOrEqual(t, allowed, 0.9*owed, "the shares together admit close to the limit")
		require.Greater(t, len(all), 2*int(allowed), "the load must exceed the limit for the test to mean anything")
	})

}
