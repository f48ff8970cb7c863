package replay

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTimeTicksAreRoundTimes(t *testing.T) {
	for _, c := range []struct {
		start time.Time
		span  time.Duration
		want  []string
	}{
		{t0.Add(300 * time.Millisecond), 3 * time.Second, []string{"12:00:01", "12:00:02", "12:00:03"}},
		{t0.Add(-30 * time.Minute), 2 * time.Hour, []string{"11:30", "12:00", "12:30", "13:00", "13:30"}},
		{t0.Add(10 * time.Hour), 6 * time.Hour, []string{"Nov 24 22:00", "Nov 25 00:00", "Nov 25 02:00", "Nov 25 04:00"}},
		// Weeks, from Mondays.
		{t0, 40 * 24 * time.Hour, []string{"Nov 30", "Dec 7", "Dec 14", "Dec 21", "Dec 28"}},
		// Past weeks, midnights a fifth of the span apart.
		{t0, 100 * 24 * time.Hour, []string{"Dec 11", "Dec 31", "Jan 20", "Feb 9", "Mar 1"}},
	} {
		at, layout := timeTicks(c.start, c.span)
		var got []string
		for _, a := range at {
			got = append(got, a.Format(layout))
		}
		require.Equal(t, c.want, got, "%v + %v", c.start, c.span)
	}
}
