package tokenbucket_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/builtins"
	"github.com/sluicehq/sluice/store/memstore"
)

func TestMain(m *testing.M) { builtins.Main(m) }

// newMemStore returns memstore.New(opts...), failing t on an error.
func newMemStore(t testing.TB, opts ...memstore.Option) *memstore.Store {
	t.Helper()
	s, err := memstore.New(opts...)
	require.NoError(t, err)
	return s
}

func TestNewRejectsBadArguments(t *testing.T) {
	_, err := tokenbucket.New(nil)
	require.ErrorContains(t, err, "store must not be nil")
	_, err = tokenbucket.New(newMemStore(t), nil)
	require.ErrorContains(t, err, "option 0 is nil")
	_, err = tokenbucket.New(newMemStore(t), tokenbucket.WithClock(nil))
	require.ErrorContains(t, err, "WithClock(nil)")
}

func TestClockOutsideRange(t *testing.T) {
	l, err := tokenbucket.New(newMemStore(t), tokenbucket.WithClock(sluicetest.NewFakeClock(time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC))))
	require.NoError(t, err)
	_, err = l.AllowN(t.Context(), "k", sluice.PerSecond(1), 1)
	require.ErrorContains(t, err, "outside the years 1970 to 2100")
}

func TestValidateLimit(t *testing.T) {
	for _, ok := range []sluice.Limit{sluice.PerSecond(10_000), sluice.PerSecond(3), sluice.PerSecond(500_000), sluice.PerMinute(7), sluice.PerSecond(1_000_000)} {
		require.NoError(t, tokenbucket.ValidateLimit(ok), ok.String())
	}
	// 1 s / 600,000 = 1.67 µs, rounded up to 2 µs: 17% below the limit.
	require.ErrorIs(t, tokenbucket.ValidateLimit(sluice.PerSecond(600_000)), sluice.ErrInvalidLimit)
	require.ErrorIs(t, tokenbucket.ValidateLimit(sluice.PerSecond(0)), sluice.ErrInvalidLimit)
}
