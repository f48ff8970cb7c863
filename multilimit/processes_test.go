package multilimit_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/fixedwindow"
	"github.com/sluicehq/sluice/algorithms/gcra"
	"github.com/sluicehq/sluice/algorithms/slidinglog"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/multilimit"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/builtins"
	"github.com/sluicehq/sluice/sluicetest/redistest"
)

// The limits of the multi-process test, in the order of each call. Each
// denies at some point of a run, and two of them cannot refill or slide
// within it, so what they gave can be counted exactly afterwards.
var (
	// total: GCRA whose emission interval is a day: it gives its burst
	// and nothing more during a run, and never denies first.
	totalLimit = sluice.Limit{Rate: 1, Period: 24 * time.Hour, Burst: 1000}
	// perSecond: a fixed window of 60 per aligned second.
	perSecondWindow = sluice.PerSecond(60)
	// smooth: a token bucket, 100/s with a burst of 5.
	smoothLimit = sluice.Limit{Rate: 100, Period: time.Second, Burst: 5}
	// hourly: a sliding log of 180 per hour: it runs out during a run and
	// nothing leaves it.
	hourlyLog = sluice.PerHour(180)
)

func processChecks(tenant string) []multilimit.Check {
	return []multilimit.Check{
		{Key: sluice.Key(tenant, "total"), Limit: totalLimit, Algorithm: multilimit.GCRA},
		{Key: sluice.Key(tenant, "per-second"), Limit: perSecondWindow, Algorithm: multilimit.FixedWindow},
		{Key: sluice.Key(tenant, "smooth"), Limit: smoothLimit, Algorithm: multilimit.TokenBucket},
		{Key: sluice.Key(tenant, "hourly"), Limit: hourlyLog, Algorithm: multilimit.SlidingLog},
	}
}

// loadSpec is what every process of the "multilimit" job is given.
type loadSpec struct {
	Backends   []string // process i uses Backends[i % len]
	Addrs      []string
	Tenant     string
	Goroutines int
	Duration   time.Duration
}

// call is one decision of the job: when it started and ended (Unix
// nanoseconds) and which limit denied it (-1: allowed).
type call struct {
	start, end int64
	denied     int
}

func init() { builtins.RegisterJob("multilimit", runLoad) }

func runLoad(index int, raw []byte, out io.Writer) error {
	var spec loadSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return err
	}
	store, closeStore, err := builtins.OpenStore(spec.Backends[index%len(spec.Backends)], spec.Addrs, spec.Goroutines)
	if err != nil {
		return err
	}
	defer closeStore()
	l, err := multilimit.New(store)
	if err != nil {
		return err
	}
	cs := processChecks(spec.Tenant)
	var (
		mu    sync.Mutex
		calls []call
		errs  []error
		wg    sync.WaitGroup
	)
	deadline := time.Now().Add(spec.Duration)
	for range spec.Goroutines {
		wg.Go(func() {
			var mine []call
			for time.Now().Before(deadline) {
				start := time.Now().UnixNano()
				d, err := l.AllowN(context.Background(), cs, 1)
				end := time.Now().UnixNano()
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				mine = append(mine, call{start: start, end: end, denied: d.Denied})
			}
			mu.Lock()
			calls = append(calls, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d goroutines failed, first: %w", len(errs), errs[0])
	}
	for _, c := range calls {
		if _, err := fmt.Fprintf(out, "%d %d %d\n", c.start, c.end, c.denied); err != nil {
			return err
		}
	}
	return nil
}

func parseCalls(t *testing.T, outs [][]byte) []call {
	var calls []call
	for _, out := range outs {
		s := bufio.NewScanner(bytes.NewReader(out))
		for s.Scan() {
			f := strings.Fields(s.Text())
			require.Len(t, f, 3)
			var c call
			var err error
			c.start, err = strconv.ParseInt(f[0], 10, 64)
			require.NoError(t, err)
			c.end, err = strconv.ParseInt(f[1], 10, 64)
			require.NoError(t, err)
			c.denied, err = strconv.Atoi(f[2])
			require.NoError(t, err)
			calls = append(calls, c)
		}
	}
	return calls
}

// TestProcessesNoPartialConsumption: 4 OS processes x 16 goroutines (two
// processes through go-redis, two through rueidis) check four limits of
// four algorithms in one call each, on a real redis-server and on the real
// Cluster. Afterwards: the two limits that cannot refill during the run
// gave exactly what was admitted (a request that any limit denied consumed
// from none), every limit denied some requests, and each limit's own bound
// holds over the run.
func TestProcessesNoPartialConsumption(t *testing.T) {
	targets := map[string]func(t *testing.T) ([]string, []string, sluicetest.Tier){
		"redis": func(t *testing.T) ([]string, []string, sluicetest.Tier) {
			server := redistest.SharedRedis(t)
			return []string{"go-redis", "rueidis"}, []string{server.Addr()}, redistest.RueidisTier(t, server)
		},
		"cluster": func(t *testing.T) ([]string, []string, sluicetest.Tier) {
			cluster := redistest.SharedCluster(t)
			return []string{"cluster/go-redis", "cluster/rueidis"}, cluster.Addrs(), redistest.RueidisClusterTier(t, cluster)
		},
	}
	for name, target := range targets {
		t.Run(name, func(t *testing.T) {
			backends, addrs, tier := target(t)
			spec := loadSpec{Backends: backends, Addrs: addrs, Tenant: sluicetest.UniqueKey(t), Goroutines: 16, Duration: 3 * time.Second}
			calls := parseCalls(t, builtins.RunJob(t, "multilimit", 4, spec))
			var admitted int64
			deniedBy := make([]int, 4)
			first, last := calls[0].start, calls[0].end
			for _, c := range calls {
				first, last = min(first, c.start), max(last, c.end)
				if c.denied < 0 {
					admitted++
				} else {
					deniedBy[c.denied]++
				}
			}
			span := time.Duration(last - first)
			t.Logf("%d calls in %s: admitted %d; denied by total %d, per-second window %d, token bucket %d, hourly log %d",
				len(calls), span, admitted, deniedBy[0], deniedBy[1], deniedBy[2], deniedBy[3])

			// Exact accounting on the limits that cannot refill.
			cs := processChecks(spec.Tenant)
			g, err := gcra.New(tier.Store)
			require.NoError(t, err)
			total, err := g.AllowN(t.Context(), cs[0].Key, totalLimit, 0)
			require.NoError(t, err)
			require.Equal(t, totalLimit.Burst-admitted, total.Remaining, "the total limit gave exactly what was admitted")
			sl, err := slidinglog.New(tier.Store)
			require.NoError(t, err)
			hourly, err := sl.AllowN(t.Context(), cs[3].Key, hourlyLog, 0)
			require.NoError(t, err)
			require.Equal(t, hourlyLog.Rate-admitted, hourly.Remaining, "the hourly log holds exactly what was admitted")

			// Every limit but the total denied, so each was the one that
			// said no while others would have said yes.
			require.Zero(t, deniedBy[0])
			for i := 1; i < 4; i++ {
				require.Positive(t, deniedBy[i], "limit %d never denied: the run did not exercise it", i)
			}

			// Each limit's bound: the token bucket over the run, the
			// fixed window per aligned second (calls surely inside one).
			require.LessOrEqual(t, float64(admitted), float64(smoothLimit.Burst)+float64(smoothLimit.Rate)*span.Seconds())
			perWindow := map[int64]int64{}
			for _, c := range calls {
				if c.denied < 0 && c.start/int64(time.Second) == c.end/int64(time.Second) {
					perWindow[c.start/int64(time.Second)]++
				}
			}
			for w, n := range perWindow {
				require.LessOrEqual(t, n, perSecondWindow.Rate, "window %d", w)
			}

			// The states are the algorithms' own: their limiters agree.
			fw, err := fixedwindow.New(tier.Store)
			require.NoError(t, err)
			_, err = fw.AllowN(t.Context(), cs[1].Key, perSecondWindow, 0)
			require.NoError(t, err)
			tb, err := tokenbucket.New(tier.Store)
			require.NoError(t, err)
			_, err = tb.AllowN(t.Context(), cs[2].Key, smoothLimit, 0)
			require.NoError(t, err)
		})
	}
}
