package embedded

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
)

func TestKeysExpireWithTheClock(t *testing.T) {
	// No ticker: TTLs move only here, by exactly what the test says,
	// however long the machine takes between two lines.
	s, err := start(false)
	require.NoError(t, err)
	defer s.Close()
	l, err := tokenbucket.New(s)
	require.NoError(t, err)
	_, err = l.AllowN(t.Context(), "k", sluice.PerSecond(10), 1) // 100 ms to full, PX 1100 ms
	require.NoError(t, err)
	require.True(t, s.Server().Exists("k"+tokenbucket.KeySuffix))

	// Move TTLs by hand instead of sleeping, as the ticker does with the
	// wall clock: one second, then 200 ms more.
	base := s.lastTick
	s.moveTTLs(base.Add(time.Second))
	require.True(t, s.Server().Exists("k"+tokenbucket.KeySuffix))
	s.moveTTLs(base.Add(1200 * time.Millisecond))
	require.False(t, s.Server().Exists("k"+tokenbucket.KeySuffix), "expired after its TTL")
}

func TestCloseTwice(t *testing.T) {
	s, err := Start()
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
}
