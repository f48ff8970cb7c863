package fixedwindow_test

import (
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/fixedwindow"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/builtins"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/goredisstore"
)

// TestConcurrentProcesses: 4 processes × 16 goroutines on one key of a real
// redis-server for 2 s, with 250 ms windows. In every aligned window, the
// calls surely decided inside it admit at most Rate, and every full window
// that the load saturated is used up: a denial surely decided in a window
// means its count had reached Rate, so the full windows with one admit
// Rate each (counted by their calls' start, give or take the calls that
// straddle a boundary). On a loaded machine a window in which the callers
// or the server got no CPU may see no denial, and is not owed its Rate.
func TestConcurrentProcesses(t *testing.T) {
	server := redistest.SharedRedis(t)
	limit := sluice.Limit{Rate: 100, Period: 250 * time.Millisecond, Burst: 1}
	period := int64(limit.Period)
	calls := builtins.RunLoad(t, builtins.Load{
		Algorithm: "fixedwindow", Backend: "go-redis", Addr: server.Addr(),
		Key: sluice.Key(sluicetest.UniqueKey(t)), Limit: limit,
		Processes: 4, Goroutines: 16, Duration: 2 * time.Second,
	})
	allowed := builtins.Allowed(calls)
	perWindow := map[int64]int{}
	for _, c := range allowed {
		if c.Start/period == c.End/period { // surely decided in this window
			perWindow[c.Start/period]++
		}
	}
	first, last := calls[0].Start/period, calls[len(calls)-1].Start/period
	for w := first; w <= last; w++ {
		require.LessOrEqual(t, perWindow[w], int(limit.Rate), "window %d", w)
	}
	// Full windows (not the first or last) with a denial surely decided
	// inside them are used up.
	saturated := map[int64]bool{}
	for _, c := range calls {
		if w := c.Start / period; !c.Allowed && w == c.End/period && w > first && w < last {
			saturated[w] = true
		}
	}
	full := 0
	for _, c := range allowed {
		if saturated[c.Start/period] {
			full++
		}
	}
	windows := int(last - first - 1)
	t.Logf("%d calls, %d allowed over %d full windows, %d of them saturated, which admitted %d; at most %d per window",
		len(calls), len(allowed), windows, len(saturated), full, maxOf(perWindow))
	require.GreaterOrEqual(t, float64(full), 0.9*float64(len(saturated))*float64(limit.Rate))
	require.GreaterOrEqual(t, len(saturated), 1, "the load must saturate a full window for the test to mean anything")
}

// TestBoundaryBurst demonstrates the fixed window's known weakness on a
// real redis-server and its clock: a client that sends Rate requests just
// before a window ends and Rate just after it begins gets 2 × Rate through
// in much less than one Period.
func TestBoundaryBurst(t *testing.T) {
	server := redistest.SharedRedis(t)
	client := redis.NewClient(&redis.Options{Addr: server.Addr(), MaxRetries: -1, PoolSize: 16})
	t.Cleanup(func() { _ = client.Close() })
	store, err := goredisstore.New(client)
	require.NoError(t, err)
	l, err := fixedwindow.New(store)
	require.NoError(t, err)
	limit := sluice.Limit{Rate: 50, Period: time.Second, Burst: 1}
	key := sluice.Key(sluicetest.UniqueKey(t))

	serverNow, err := client.Time(t.Context()).Result()
	require.NoError(t, err)
	boundary := serverNow.Truncate(limit.Period).Add(limit.Period)
	if time.Until(boundary) < 300*time.Millisecond {
		boundary = boundary.Add(limit.Period) // leave time to aim before it
	}
	burst := func() []builtins.Call {
		calls := make([]builtins.Call, limit.Rate)
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() {
				start := time.Now().UnixNano()
				d, err := l.AllowN(t.Context(), key, limit, 1)
				calls[i] = builtins.Call{Start: start, End: time.Now().UnixNano(), Allowed: err == nil && d.Allowed}
			})
		}
		wg.Wait()
		return calls
	}
	time.Sleep(time.Until(boundary.Add(-200 * time.Millisecond)))
	before := burst()
	time.Sleep(time.Until(boundary.Add(time.Millisecond)))
	after := burst()

	all := append(before, after...)
	sort.Slice(all, func(i, j int) bool { return all[i].Start < all[j].Start })
	within := builtins.MaxSurelyWithin(builtins.Allowed(all), limit.Period/2)
	t.Logf("%d allowed before the boundary, %d after; %d surely within %s",
		len(builtins.Allowed(before)), len(builtins.Allowed(after)), within, limit.Period/2)
	require.Equal(t, 2*int(limit.Rate), within, "2 × Rate within half a Period")
}

func maxOf(m map[int64]int) int {
	best := 0
	for _, v := range m {
		best = max(best, v)
	}
	return best
}
