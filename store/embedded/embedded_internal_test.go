package embedded

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
)

func TestKeysExpireWithTheClock(t *testing.T) {
	s, err := Start()
	require.NoError(t, err)
	defer s.Close()
	l, err := tokenbucket.New(s)
	require.NoError(t, err)
	_, err = l.AllowN(t.Context(), "k", sluice.PerSecond(10), 1) // 100 ms to full, PX 1100 ms
	require.NoError(t, err)
	require.True(t, s.Server().Exists("k"+tokenbucket.KeySuffix))

	// Move TTLs by hand instead of sleeping (the goroutine does the same
	// with the wall clock, and does nothing until it catches up with these
	// times): one second, then 200 ms more.
	start := time.Now()
	s.moveTTLs(start.Add(time.Second))
	require.True(t, s.Server().Exists("k"+tokenbucket.KeySuffix))
	s.moveTTLs(start.Add(1200 * time.Millisecond))
	require.False(t, s.Server().Exists("k"+tokenbucket.KeySuffix), "expired after its TTL")
}

func TestCloseTwice(t *testing.T) {
	s, err := Start()
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
}
