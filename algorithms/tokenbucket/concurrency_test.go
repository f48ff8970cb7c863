package tokenbucket_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/goredisstore"
	"github.com/sluicehq/sluice/store/rueidisstore"
)

// The multi-process test: several OS processes (this test binary, started
// again in worker mode) hammer one key on a real redis-server. The bucket
// must admit at most Burst + Rate × T, T measured from the first call's
// start to the last call's end over all processes, and at least 95% of it.

const (
	workerEnv        = "SLUICE_TOKENBUCKET_WORKER" // backend|addr|key|duration
	processes        = 4
	goroutinesPerPod = 16
	loadDuration     = 3 * time.Second
)

var concurrencyLimit = sluice.Limit{Rate: 500, Period: time.Second, Burst: 100}

type workerResult struct {
	allowed, calls, errors int64
	firstStart, lastEnd    int64 // Unix nanoseconds
}

func TestConcurrentProcesses(t *testing.T) {
	if spec := os.Getenv(workerEnv); spec != "" {
		runWorker(t, spec)
		return
	}
	server := sluicetest.SharedRedis(t)
	for _, backend := range []string{"go-redis", "rueidis"} {
		t.Run(backend, func(t *testing.T) {
			key := sluice.Key(sluicetest.UniqueKey(t))
			spec := strings.Join([]string{backend, server.Addr(), key, loadDuration.String()}, "|")
			results := make([]workerResult, processes)
			var wg sync.WaitGroup
			for p := range processes {
				wg.Go(func() {
					cmd := exec.Command(os.Args[0], "-test.run=^TestConcurrentProcesses$", "-test.count=1", "-test.v")
					cmd.Env = append(os.Environ(), workerEnv+"="+spec)
					out, err := cmd.CombinedOutput()
					if err != nil {
						t.Errorf("worker %d: %v\n%s", p, err, out)
						return
					}
					results[p], err = parseWorkerResult(string(out))
					if err != nil {
						t.Errorf("worker %d: %v\n%s", p, err, out)
					}
				})
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			var total workerResult
			total.firstStart = results[0].firstStart
			for _, r := range results {
				total.allowed += r.allowed
				total.calls += r.calls
				total.errors += r.errors
				total.firstStart = min(total.firstStart, r.firstStart)
				total.lastEnd = max(total.lastEnd, r.lastEnd)
			}
			elapsed := time.Duration(total.lastEnd - total.firstStart)
			bound := float64(concurrencyLimit.Burst) + float64(concurrencyLimit.Rate)*elapsed.Seconds()/concurrencyLimit.Period.Seconds()
			t.Logf("%s: %d processes x %d goroutines, %d calls over %s, %d allowed, bound %.1f (%.2f%%)",
				backend, processes, goroutinesPerPod, total.calls, elapsed, total.allowed, bound, 100*float64(total.allowed)/bound)
			require.Zero(t, total.errors)
			require.GreaterOrEqual(t, elapsed, loadDuration)
			require.LessOrEqual(t, float64(total.allowed), bound, "over-admission")
			require.GreaterOrEqual(t, float64(total.allowed), 0.95*bound, "under-admission")
			require.Greater(t, total.calls, 2*total.allowed, "the load must exceed the limit for the test to mean anything")
		})
	}
}

func runWorker(t *testing.T, spec string) {
	parts := strings.Split(spec, "|")
	require.Len(t, parts, 4)
	backend, addr, key := parts[0], parts[1], parts[2]
	duration, err := time.ParseDuration(parts[3])
	require.NoError(t, err)

	var store sluice.Store
	switch backend {
	case "go-redis":
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: goroutinesPerPod})
		defer c.Close()
		store = goredisstore.New(c)
	case "rueidis":
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		require.NoError(t, err)
		defer c.Close()
		store = rueidisstore.New(c)
	default:
		t.Fatalf("unknown backend %q", backend)
	}
	l, err := tokenbucket.New(store)
	require.NoError(t, err)

	var allowed, calls, errs atomic.Int64
	var first, last atomic.Int64
	first.Store(1<<63 - 1)
	deadline := time.Now().Add(duration)
	var wg sync.WaitGroup
	for range goroutinesPerPod {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				start := time.Now().UnixNano()
				d, err := l.AllowN(context.Background(), key, concurrencyLimit, 1)
				end := time.Now().UnixNano()
				for v := first.Load(); start < v && !first.CompareAndSwap(v, start); v = first.Load() {
				}
				for v := last.Load(); end > v && !last.CompareAndSwap(v, end); v = last.Load() {
				}
				calls.Add(1)
				switch {
				case err != nil:
					errs.Add(1)
				case d.Allowed:
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	fmt.Printf("RESULT %d %d %d %d %d\n", allowed.Load(), calls.Load(), errs.Load(), first.Load(), last.Load())
}

func parseWorkerResult(out string) (workerResult, error) {
	for _, line := range strings.Split(out, "\n") {
		fields, ok := strings.CutPrefix(line, "RESULT ")
		if !ok {
			continue
		}
		var nums [5]int64
		parts := strings.Fields(fields)
		if len(parts) != 5 {
			return workerResult{}, fmt.Errorf("malformed result line %q", line)
		}
		for i, p := range parts {
			n, err := strconv.ParseInt(p, 10, 64)
			if err != nil {
				return workerResult{}, err
			}
			nums[i] = n
		}
		return workerResult{allowed: nums[0], calls: nums[1], errors: nums[2], firstStart: nums[3], lastEnd: nums[4]}, nil
	}
	return workerResult{}, fmt.Errorf("no RESULT line")
}
