package sluicetest

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/store/memstore"
)

// step is one call in a conformance vector: move the clock, then ask.
type step struct {
	advance time.Duration
	limit   sluice.Limit // zero: the vector's limit
	key     string       // "": the vector's key
	n       int64
	want    sluice.Decision // Limit is filled in by the runner
}

type vector struct {
	name  string
	limit sluice.Limit
	steps []step
}

const us = time.Microsecond

func allowed(remaining int64, resetAfter time.Duration) sluice.Decision {
	return sluice.Decision{Allowed: true, Remaining: remaining, ResetAfter: resetAfter}
}

func denied(remaining int64, retryAfter, resetAfter time.Duration) sluice.Decision {
	return sluice.Decision{Remaining: remaining, RetryAfter: retryAfter, ResetAfter: resetAfter}
}

var tenPerSecondBurst5 = sluice.Limit{Rate: 10, Period: time.Second, Burst: 5} // one token per 100 ms

// tokenBucketVectors are the token bucket's decisions worked out by hand
// from the algorithm's definition; every tier must reproduce them exactly.
var tokenBucketVectors = []vector{
	{name: "burst, deny, retry exactly at RetryAfter, partial refill", limit: tenPerSecondBurst5, steps: []step{
		{n: 1, want: allowed(4, 100*time.Millisecond)},
		{n: 1, want: allowed(3, 200*time.Millisecond)},
		{n: 1, want: allowed(2, 300*time.Millisecond)},
		{n: 1, want: allowed(1, 400*time.Millisecond)},
		{n: 1, want: allowed(0, 500*time.Millisecond)},
		{n: 1, want: denied(0, 100*time.Millisecond, 500*time.Millisecond)},
		{advance: 99999 * us, n: 1, want: denied(0, 1*us, 400001*us)},
		{advance: 1 * us, n: 1, want: allowed(0, 500*time.Millisecond)},
		{advance: 250 * time.Millisecond, n: 0, want: allowed(2, 250*time.Millisecond)},
		{advance: 10 * time.Second, n: 0, want: allowed(5, 0)},
	}},
	{name: "weighted cost", limit: tenPerSecondBurst5, steps: []step{
		{n: 3, want: allowed(2, 300*time.Millisecond)},
		{n: 3, want: denied(2, 100*time.Millisecond, 300*time.Millisecond)},
		{n: 2, want: allowed(0, 500*time.Millisecond)},
		{advance: 150 * time.Millisecond, n: 2, want: denied(1, 50*time.Millisecond, 350*time.Millisecond)},
	}},
	{name: "cost equal to burst", limit: tenPerSecondBurst5, steps: []step{
		{n: 5, want: allowed(0, 500*time.Millisecond)},
		{n: 5, want: denied(0, 500*time.Millisecond, 500*time.Millisecond)},
		{advance: 500 * time.Millisecond, n: 5, want: allowed(0, 500*time.Millisecond)},
	}},
	{name: "interval rounded up to whole microseconds", limit: sluice.Limit{Rate: 3, Period: time.Second, Burst: 5}, steps: []step{
		// ceil(1 s / 3) = 333334 µs per token: a full burst still fits.
		{n: 1, want: allowed(4, 333334*us)},
		{n: 4, want: allowed(0, 1666670*us)},
		{n: 1, want: denied(0, 333334*us, 1666670*us)},
		// After 1 s, 666670 µs of deficit remain: 2 whole tokens, not 3.
		{advance: time.Second, n: 0, want: allowed(2, 666670*us)},
	}},
	{name: "peek on an empty bucket writes nothing", limit: sluice.Limit{Rate: 1, Period: time.Second, Burst: 1}, steps: []step{
		{n: 1, want: allowed(0, time.Second)},
		{n: 0, want: denied(0, time.Second, time.Second)},
		{n: 0, want: denied(0, time.Second, time.Second)},
		{advance: time.Second, n: 0, want: allowed(1, 0)},
	}},
	{name: "idle for years", limit: tenPerSecondBurst5, steps: []step{
		{n: 5, want: allowed(0, 500*time.Millisecond)},
		{advance: 3 * 366 * 24 * time.Hour, n: 1, want: allowed(4, 100*time.Millisecond)},
		{advance: 20 * 366 * 24 * time.Hour, n: 5, want: allowed(0, 500*time.Millisecond)},
	}},
	{name: "clock going backwards mints no tokens", limit: tenPerSecondBurst5, steps: []step{
		{n: 2, want: allowed(3, 200*time.Millisecond)},
		{advance: -10 * time.Second, n: 0, want: denied(0, 9800*time.Millisecond, 10200*time.Millisecond)},
		{n: 1, want: denied(0, 9800*time.Millisecond, 10200*time.Millisecond)},
		{advance: 10 * time.Second, n: 0, want: allowed(3, 200*time.Millisecond)},
	}},
	{name: "keys are isolated", limit: tenPerSecondBurst5, steps: []step{
		{n: 5, want: allowed(0, 500*time.Millisecond)},
		{key: "other", n: 1, want: allowed(4, 100*time.Millisecond)},
		{n: 1, want: denied(0, 100*time.Millisecond, 500*time.Millisecond)},
	}},
	{name: "limit changed mid-stream", limit: tenPerSecondBurst5, steps: []step{
		{n: 3, want: allowed(2, 300*time.Millisecond)},
		{limit: sluice.Limit{Rate: 10, Period: time.Second, Burst: 10}, n: 0, want: allowed(7, 300*time.Millisecond)},
		{limit: sluice.Limit{Rate: 10, Period: time.Second, Burst: 2}, n: 0, want: denied(0, 200*time.Millisecond, 300*time.Millisecond)},
	}},
}

func runTokenBucket(t *testing.T, newTier func(t *testing.T) Tier) {
	for _, v := range tokenBucketVectors {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			tier := newTier(t)
			clock := NewFakeClock(Epoch)
			l, err := tokenbucket.New(tier.Store, tokenbucket.WithClock(clock))
			require.NoError(t, err)
			key := UniqueKey(t)
			for i, s := range v.steps {
				clock.Advance(s.advance)
				limit, k := v.limit, key
				if s.limit != (sluice.Limit{}) {
					limit = s.limit
				}
				if s.key != "" {
					k = key + ":" + s.key
				}
				got, err := l.AllowN(t.Context(), k, limit, s.n)
				require.NoError(t, err, "step %d", i)
				want := s.want
				want.Limit = limit
				require.Equal(t, want, got, "%s: step %d (n=%d)", tier.Name, i, s.n)
			}
		})
	}

	t.Run("state is exact microseconds with a TTL", func(t *testing.T) {
		t.Parallel()
		tier := newTier(t)
		clock := NewFakeClock(Epoch)
		l, err := tokenbucket.New(tier.Store, tokenbucket.WithClock(clock))
		require.NoError(t, err)
		key := UniqueKey(t)
		stateKey := key + tokenbucket.KeySuffix
		_, err = l.AllowN(t.Context(), key, tenPerSecondBurst5, 4)
		require.NoError(t, err)
		// Through Lua's tostring or '..' this would read 1.7672256004235e+15.
		raw, ok, err := tier.Get(t.Context(), stateKey)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, strconv.FormatInt(Epoch.UnixMicro()+400_000, 10), raw)
		ttl, ok, err := tier.TTL(t.Context(), stateKey)
		require.NoError(t, err)
		require.True(t, ok)
		require.Greater(t, ttl, time.Second, "TTL = time to full (400 ms) + 1 s margin")
		require.LessOrEqual(t, ttl, 1400*time.Millisecond)

		// A denial and a peek leave the state untouched.
		_, err = l.AllowN(t.Context(), key, tenPerSecondBurst5, 5)
		require.NoError(t, err)
		_, err = l.AllowN(t.Context(), key, tenPerSecondBurst5, 0)
		require.NoError(t, err)
		again, _, err := tier.Get(t.Context(), stateKey)
		require.NoError(t, err)
		require.Equal(t, raw, again)

		// A peek of a missing key creates nothing.
		_, err = l.AllowN(t.Context(), key+":peek", tenPerSecondBurst5, 0)
		require.NoError(t, err)
		_, ok, err = tier.Get(t.Context(), key+":peek"+tokenbucket.KeySuffix)
		require.NoError(t, err)
		require.False(t, ok)
	})

	t.Run("server clock by default", func(t *testing.T) {
		t.Parallel()
		tier := newTier(t)
		l, err := tokenbucket.New(tier.Store)
		require.NoError(t, err)
		key := UniqueKey(t)
		limit := sluice.Limit{Rate: 1, Period: time.Hour, Burst: 2}
		for _, want := range []bool{true, true, false} {
			d, err := l.AllowN(t.Context(), key, limit, 1)
			require.NoError(t, err)
			require.Equal(t, want, d.Allowed)
		}
		raw, ok, err := tier.Get(t.Context(), key+tokenbucket.KeySuffix)
		require.NoError(t, err)
		require.True(t, ok)
		tat, err := strconv.ParseInt(raw, 10, 64)
		require.NoError(t, err)
		// The stored time is the server's now plus two hours of deficit.
		require.InDelta(t, time.Now().Add(2*time.Hour).UnixMicro(), tat, float64(time.Minute.Microseconds()))
	})

	t.Run("invalid input is rejected before any write", func(t *testing.T) {
		t.Parallel()
		tier := newTier(t)
		l, err := tokenbucket.New(tier.Store, tokenbucket.WithClock(NewFakeClock(Epoch)))
		require.NoError(t, err)
		key := UniqueKey(t)
		ok := tenPerSecondBurst5
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
			{"interval rounded up by more than 1%", key, sluice.PerSecond(600_000), 1, []error{sluice.ErrInvalidLimit}},
			{"refill time over ten years", key, sluice.Limit{Rate: 1, Period: 366 * 24 * time.Hour, Burst: 11}, 1, []error{sluice.ErrInvalidLimit}},
			{"negative cost", key, ok, -1, []error{sluice.ErrInvalidCost}},
			{"cost above burst", key, ok, 6, []error{sluice.ErrInvalidCost, sluice.ErrCostExceedsBurst}},
			{"empty key", "", ok, 1, []error{sluice.ErrInvalidKey}},
		}
		for _, c := range cases {
			d, err := l.AllowN(t.Context(), c.key, c.limit, c.n)
			require.Error(t, err, c.name)
			for _, target := range c.is {
				require.ErrorIs(t, err, target, c.name)
			}
			require.Equal(t, sluice.Decision{}, d, c.name)
		}
		_, found, err := tier.Get(t.Context(), key+tokenbucket.KeySuffix)
		require.NoError(t, err)
		require.False(t, found, "nothing written")
	})

	t.Run("the script validates its own arguments", func(t *testing.T) {
		t.Parallel()
		tier := newTier(t)
		key := UniqueKey(t)
		now := Epoch.UnixMicro()
		cases := []struct {
			name string
			keys []string
			args []int64
			is   error
		}{
			{"zero rate", []string{key}, []int64{0, 1_000_000, 5, 1, now}, sluice.ErrInvalidLimit},
			{"rate over 1e12", []string{key}, []int64{2_000_000_000_000, 31_622_400_000_000, 1, 1, now}, sluice.ErrInvalidLimit},
			{"interval rounded up by more than 1%", []string{key}, []int64{600_000, 1_000_000, 5, 1, now}, sluice.ErrInvalidLimit},
			{"rate above period_us", []string{key}, []int64{1_000_001, 1_000_000, 5, 1, now}, sluice.ErrInvalidLimit},
			{"period under 1 ms", []string{key}, []int64{1, 999, 5, 1, now}, sluice.ErrInvalidLimit},
			{"negative burst", []string{key}, []int64{1, 1_000_000, -5, 1, now}, sluice.ErrInvalidLimit},
			{"burst over the maximum", []string{key}, []int64{1, 1_000_000, sluice.MaxBurst + 1, 1, now}, sluice.ErrInvalidLimit},
			{"refill too long", []string{key}, []int64{1, 31_622_400_000_000, 11, 1, now}, sluice.ErrInvalidLimit},
			{"cost above burst", []string{key}, []int64{10, 1_000_000, 5, 6, now}, sluice.ErrCostExceedsBurst},
			{"negative cost", []string{key}, []int64{10, 1_000_000, 5, -1, now}, sluice.ErrInvalidCost},
			{"negative now", []string{key}, []int64{10, 1_000_000, 5, 1, -1}, sluice.ErrInvalidLimit},
			{"now after 2100", []string{key}, []int64{10, 1_000_000, 5, 1, 4_102_444_800_000_001}, sluice.ErrInvalidLimit},
			{"missing arguments", []string{key}, []int64{10, 1_000_000}, sluice.ErrInvalidLimit},
			{"extra arguments", []string{key}, []int64{10, 1_000_000, 5, 1, now, 7}, sluice.ErrInvalidLimit},
			{"empty key", []string{""}, []int64{10, 1_000_000, 5, 1, now}, sluice.ErrInvalidKey},
			{"two keys", []string{sluice.Key(key, "a"), sluice.Key(key, "b")}, []int64{10, 1_000_000, 5, 1, now}, sluice.ErrInvalidKey},
		}
		for _, c := range cases {
			_, err := tier.Store.Run(t.Context(), tokenbucket.Script(), c.keys, c.args)
			require.ErrorIs(t, sluice.ScriptError(err), c.is, c.name)
		}
		if tier.Raw != nil {
			for _, bad := range []string{"nan", "NaN", "inf", "-inf", "1e400", "1.5", "", "abc", "0x", "5 apples"} {
				_, err := tier.Raw(t.Context(), tokenbucket.Script(), []string{key}, bad, "1000000", "5", "1")
				require.ErrorIs(t, sluice.ScriptError(err), sluice.ErrInvalidLimit, "rate %q", bad)
				_, err = tier.Raw(t.Context(), tokenbucket.Script(), []string{key}, "10", "1000000", "5", bad)
				require.ErrorIs(t, sluice.ScriptError(err), sluice.ErrInvalidCost, "cost %q", bad)
			}
		}
		_, found, err := tier.Get(t.Context(), key)
		require.NoError(t, err)
		require.False(t, found, "nothing written")
	})

	t.Run("random sequences match the in-process model", func(t *testing.T) {
		t.Parallel()
		tier := newTier(t)
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(seed, 42))
		clock := NewFakeClock(Epoch)
		got, err := tokenbucket.New(tier.Store, tokenbucket.WithClock(clock))
		require.NoError(t, err)
		want, err := tokenbucket.New(memstore.New(), tokenbucket.WithClock(clock))
		require.NoError(t, err)
		key := UniqueKey(t)
		limits := []sluice.Limit{
			tenPerSecondBurst5,
			{Rate: 3, Period: time.Second, Burst: 7},
			{Rate: 100, Period: time.Minute, Burst: 1},
			{Rate: 1000, Period: time.Second, Burst: 1000},
			{Rate: 7, Period: 13 * time.Millisecond, Burst: 3},
		}
		for i := range 300 {
			limit := limits[rng.IntN(len(limits))]
			n := rng.Int64N(limit.Burst + 1)
			clock.Advance(time.Duration(rng.Int64N(int64(400*time.Millisecond))) - 20*time.Millisecond)
			k := key + ":" + strconv.Itoa(rng.IntN(3))
			g, err := got.AllowN(t.Context(), k, limit, n)
			require.NoError(t, err)
			w, err := want.AllowN(t.Context(), k, limit, n)
			require.NoError(t, err)
			require.Equal(t, w, g, "%s: step %d, seed %d", tier.Name, i, seed)
		}
	})
}
