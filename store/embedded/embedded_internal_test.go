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
	_, err = l.AllowN(t.Context(), "k", sluice.PerSecond(10), 1) // 100 ms to full
	require.NoError(t, err)
	key := "k" + tokenbucket.KeySuffix
	require.True(t, s.Server().Exists(key))
	// The key lives to the whole second after full, plus a second.
	ttl := s.Server().TTL(key)
	require.Greater(t, ttl, 1100*time.Millisecond)
	require.LessOrEqual(t, ttl, 2100*time.Millisecond)

	// Move TTLs by hand instead of sleeping, as the ticker does with the
	// wall clock: to 10 ms before the key's TTL, then to it.
	base := s.lastTick
	s.moveTTLs(base.Add(ttl - 10*time.Millisecond))
	require.True(t, s.Server().Exists(key))
	s.moveTTLs(base.Add(ttl))
	require.False(t, s.Server().Exists(key), "expired after its TTL")
}

func TestCloseTwice(t *testing.T) {
	s, err := Start()
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
}
