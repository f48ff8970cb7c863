package memstore_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memstore"
)

// newMemStore returns memstore.New(opts...), failing t on an error.
func newMemStore(t testing.TB, opts ...memstore.Option) *memstore.Store {
	t.Helper()
	s, err := memstore.New(opts...)
	require.NoError(t, err)
	return s
}

// counter is a test script: it adds args[0] to every key and returns the
// new values, with a TTL of args[1] milliseconds.
var counter = sluice.NewScript("-- test only", func(tx sluice.LocalTx, keys []string, args []int64) ([]int64, error) {
	out := make([]int64, len(keys))
	for i, k := range keys {
		v, _ := tx.Get(k)
		v += args[0]
		tx.Set(k, v, time.Duration(args[1])*time.Millisecond)
		out[i] = v
	}
	return out, nil
})

func TestExpiry(t *testing.T) {
	clock := sluicetest.NewFakeClock(sluicetest.Epoch)
	s := newMemStore(t, memstore.WithClock(clock))
	ctx := t.Context()
	got, err := s.Run(ctx, counter, []string{"a"}, []int64{5, 1000})
	require.NoError(t, err)
	require.Equal(t, []int64{5}, got)
	ttl, ok := s.TTL("a")
	require.True(t, ok)
	require.Equal(t, time.Second, ttl)

	clock.Advance(999 * time.Millisecond)
	v, ok := s.Value("a")
	require.True(t, ok)
	require.Equal(t, int64(5), v)

	clock.Advance(time.Millisecond)
	_, ok = s.Value("a")
	require.False(t, ok, "expired at its TTL")
	got, err = s.Run(ctx, counter, []string{"a"}, []int64{1, 1000})
	require.NoError(t, err)
	require.Equal(t, []int64{1}, got, "an expired key starts from nothing")
}

// Without WithClock the store is on the system clock.
func TestNoClockIsSystemClock(t *testing.T) {
	s := newMemStore(t)
	_, err := s.Run(t.Context(), counter, []string{"a"}, []int64{1, 60_000})
	require.NoError(t, err)
	ttl, ok := s.TTL("a")
	require.True(t, ok)
	require.Greater(t, ttl, 50*time.Second)
	require.LessOrEqual(t, ttl, time.Minute)
}

// New refuses a nil option and WithClock(nil), as every other New does.
func TestNewRefusesNil(t *testing.T) {
	clock := memstore.WithClock(sluicetest.NewFakeClock(sluicetest.Epoch))
	for _, c := range []struct {
		opt  memstore.Option
		want string
	}{
		{nil, "memstore: option 1 is nil"},
		{memstore.WithClock(nil), "memstore: WithClock(nil): omit the option for the system clock"},
	} {
		s, err := memstore.New(clock, c.opt)
		require.EqualError(t, err, c.want)
		require.Nil(t, s)
	}
}

func TestExpiredEntriesAreSwept(t *testing.T) {
	clock := sluicetest.NewFakeClock(sluicetest.Epoch)
	s := newMemStore(t, memstore.WithClock(clock))
	for i := range 100_000 {
		_, err := s.Run(t.Context(), counter, []string{strconv.Itoa(i)}, []int64{1, 10})
		require.NoError(t, err)
		clock.Advance(time.Millisecond)
	}
	// The clock is now 1 ms past the last write: the keys written in the
	// last 9 ms are live (the one written 10 ms ago expires right now), and
	// the sweeps keep the rest from piling up: a shard holds at most the
	// entries of its last minSweepWrites (128) writes plus its live ones.
	require.Equal(t, 9, s.Len())
	require.LessOrEqual(t, s.Entries(), 64*(128+9))
}

func TestSpikeIsForgotten(t *testing.T) {
	clock := sluicetest.NewFakeClock(sluicetest.Epoch)
	s := newMemStore(t, memstore.WithClock(clock))
	for i := range 200_000 {
		_, err := s.Run(t.Context(), counter, []string{strconv.Itoa(i)}, []int64{1, 1000})
		require.NoError(t, err)
	}
	clock.Advance(time.Hour)
	// A small steady set of keys afterwards, 100 calls per 10 ms for 10 s:
	// they must sweep the spike away, including from the shards that none
	// of them writes to.
	for i := range 100_000 {
		_, err := s.Run(t.Context(), counter, []string{"steady" + strconv.Itoa(i%100)}, []int64{1, 1000})
		require.NoError(t, err)
		if i%100 == 99 {
			clock.Advance(10 * time.Millisecond)
		}
	}
	require.Equal(t, 100, s.Len())
	require.LessOrEqual(t, s.Entries(), 64*128+100)
}

func TestMultiKeyRunsAreAtomic(t *testing.T) {
	s := newMemStore(t)
	keys := []string{"x", "y", "z"}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			// Different key orders must not deadlock.
			ks := append([]string(nil), keys...)
			ks[0], ks[g%3] = ks[g%3], ks[0]
			for range 1000 {
				out, err := s.Run(context.Background(), counter, ks, []int64{1, 60_000})
				if err != nil {
					t.Error(err)
					return
				}
				if out[0] != out[1] || out[1] != out[2] {
					t.Errorf("torn update: %v", out)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, k := range keys {
		v, ok := s.Value(k)
		require.True(t, ok)
		require.Equal(t, int64(8000), v)
	}
}

func TestErrors(t *testing.T) {
	s := newMemStore(t)
	_, err := s.Run(t.Context(), sluice.NewScript("return 1", nil), []string{"k"}, nil)
	require.ErrorContains(t, err, "no in-process implementation")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = s.Run(ctx, counter, []string{"k"}, []int64{1, 1})
	require.ErrorIs(t, err, context.Canceled)
}
