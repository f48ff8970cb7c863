package sluice_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
)

func TestLimitHelpers(t *testing.T) {
	require.Equal(t, sluice.Limit{Rate: 5, Period: time.Second, Burst: 5}, sluice.PerSecond(5))
	require.Equal(t, sluice.Limit{Rate: 5, Period: time.Minute, Burst: 5}, sluice.PerMinute(5))
	require.Equal(t, sluice.Limit{Rate: 5, Period: time.Hour, Burst: 5}, sluice.PerHour(5))
	require.Equal(t, sluice.Limit{Rate: 5, Period: time.Hour, Burst: 9}, sluice.PerHour(5).WithBurst(9))
	require.Equal(t, "100/1m0s burst 20", sluice.PerMinute(100).WithBurst(20).String())
}

func TestLimitValidate(t *testing.T) {
	valid := []sluice.Limit{
		sluice.PerSecond(1),
		sluice.PerSecond(1_000_000),
		{Rate: 1, Period: time.Millisecond, Burst: 1},
		{Rate: 1, Period: sluice.MaxPeriod, Burst: 10},
		{Rate: sluice.MaxRate, Period: sluice.MaxPeriod, Burst: sluice.MaxBurst},
	}
	for _, l := range valid {
		require.NoError(t, l.Validate(), l.String())
	}
	invalid := map[string]sluice.Limit{
		"zero":                    {},
		"zero rate":               {Period: time.Second, Burst: 1},
		"negative rate":           {Rate: -1, Period: time.Second, Burst: 1},
		"rate over max":           {Rate: sluice.MaxRate + 1, Period: sluice.MaxPeriod, Burst: 1},
		"period under 1ms":        {Rate: 1, Period: time.Millisecond - 1, Burst: 1},
		"period over max":         {Rate: 1, Period: sluice.MaxPeriod + 1, Burst: 1},
		"over one per µs":         {Rate: 1001, Period: time.Millisecond, Burst: 1},
		"zero burst":              {Rate: 1, Period: time.Second},
		"negative burst":          {Rate: 1, Period: time.Second, Burst: -1},
		"burst over max":          {Rate: 1, Period: time.Second, Burst: sluice.MaxBurst + 1},
		"fill time over 10 years": {Rate: 1, Period: sluice.MaxPeriod, Burst: 11},
	}
	for name, l := range invalid {
		err := l.Validate()
		require.ErrorIs(t, err, sluice.ErrInvalidLimit, name)
		var le *sluice.LimitError
		require.True(t, errors.As(err, &le), name)
		require.Equal(t, l, le.Limit)
	}
}

func TestValidateCost(t *testing.T) {
	l := sluice.PerSecond(5)
	for _, n := range []int64{0, 1, 5} {
		require.NoError(t, l.ValidateCost(n))
	}
	err := l.ValidateCost(-1)
	require.ErrorIs(t, err, sluice.ErrInvalidCost)
	require.False(t, errors.Is(err, sluice.ErrCostExceedsBurst))
	err = l.ValidateCost(6)
	require.ErrorIs(t, err, sluice.ErrInvalidCost)
	require.ErrorIs(t, err, sluice.ErrCostExceedsBurst)
	require.ErrorContains(t, err, "can never be allowed")
}

// TestAPeriodOfPartMicrosecondsIsRefused: the scripts count in whole
// microseconds, so a Period with a fraction of one would be truncated and
// enforced above the limit (1000 per 1.0005 ms as 1000 per 1000 µs).
func TestAPeriodOfPartMicrosecondsIsRefused(t *testing.T) {
	l := sluice.Limit{Rate: 1000, Period: 1000500 * time.Nanosecond, Burst: 1000}
	err := l.Validate()
	if !errors.Is(err, sluice.ErrInvalidLimit) || !strings.Contains(err.Error(), "microsecond") {
		t.Fatalf("Validate() = %v, want an ErrInvalidLimit naming whole microseconds", err)
	}
	l.Period = 1001 * time.Microsecond
	if err := l.Validate(); err != nil {
		t.Fatalf("a whole number of microseconds: %v", err)
	}
}
