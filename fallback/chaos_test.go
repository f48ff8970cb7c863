package fallback_test

import (
	"context"
	"fmt"
	"runtime"
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
	"github.com/sluicehq/sluice/fallback"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluicetest/builtins"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/goredisstore"
	"github.com/sluicehq/sluice/store/rueidisstore"
)

func TestMain(m *testing.M) { builtins.Main(m) }

// The chaos tests run a real redis-server, started, killed, stalled and
// restarted by the test, behind both clients, configured as docs/failure.md
// recommends.

const (
	chaosTimeout  = 50 * time.Millisecond
	chaosCooldown = 200 * time.Millisecond
	// chaosSlack is what a call may take beyond its budget: the
	// goroutine that returns on the budget's timer must be scheduled, which
	// on a loaded 2-core CI machine under -race took up to 77 ms. A client
	// that waited for its own timeouts instead would take a second.
	chaosSlack = 100 * time.Millisecond
)

type backend struct {
	name     string
	newStore func(t *testing.T, addr string) sluice.Store
}

var backends = []backend{
	{"go-redis", func(t *testing.T, addr string) sluice.Store {
		c := redis.NewClient(&redis.Options{
			Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true,
			DialTimeout: 100 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second,
		})
		t.Cleanup(func() { _ = c.Close() })
		s, err := goredisstore.New(c)
		require.NoError(t, err)
		return s
	}},
	{"rueidis", func(t *testing.T, addr string) sluice.Store {
		c, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress: []string{addr}, DisableCache: true,
			Dialer: netDialer(100 * time.Millisecond), ConnWriteTimeout: time.Second,
		})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		s, err := rueidisstore.New(c)
		require.NoError(t, err)
		return s
	}},
}

// chaosLimiter is a token bucket on the store, behind the fallback
// decorator with short timeouts so that the tests run quickly.
func chaosLimiter(t *testing.T, store sluice.Store, policy fallback.Policy, opts ...fallback.Option) *fallback.Limiter {
	tb, err := tokenbucket.New(store)
	require.NoError(t, err)
	l, err := fallback.New(tb, append([]fallback.Option{
		fallback.WithPolicy(policy), fallback.WithTimeout(chaosTimeout),
		fallback.WithBreaker(fallback.Breaker{Failures: 5, Cooldown: chaosCooldown, Probes: 2}),
	}, opts...)...)
	require.NoError(t, err)
	return l
}

type callLog struct {
	mu      sync.Mutex
	slowest time.Duration
	slow    int
	calls   int
	errs    []string
	sources map[sluice.Source]int
}

func (c *callLog) record(took time.Duration, d sluice.Decision, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	c.slowest = max(c.slowest, took)
	if took > chaosTimeout+chaosSlack {
		c.slow++
	}
	if err != nil {
		c.errs = append(c.errs, err.Error())
		return
	}
	if c.sources == nil {
		c.sources = map[sluice.Source]int{}
	}
	c.sources[d.Source]++
}

// hammer calls l from goroutines until ctx ends.
func hammer(ctx context.Context, l sluice.Limiter, key string, goroutines int, log *callLog) *sync.WaitGroup {
	var wg sync.WaitGroup
	limit := sluice.PerSecond(1_000_000)
	for g := range goroutines {
		wg.Go(func() {
			k := key + ":" + strconv.Itoa(g%4)
			for ctx.Err() == nil {
				start := time.Now()
				d, err := l.AllowN(context.Background(), k, limit, 1)
				log.record(time.Since(start), d, err)
				time.Sleep(time.Millisecond)
			}
		})
	}
	return &wg
}

// TestKillAndRestart: kill -9 the server under load; every call returns
// within the budget and follows the policy; after a restart the limiter
// recovers on its own (new connections, NOSCRIPT) without a caller error.
func TestKillAndRestart(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			server := redistest.StartRedis(t)
			l := chaosLimiter(t, b.newStore(t, server.Addr()), fallback.Closed())
			ctx, stop := context.WithCancel(t.Context())
			var healthy, outage, recovered callLog
			phase := atomic.Pointer[callLog]{}
			phase.Store(&healthy)
			logTo := &switchLog{phase: &phase}
			wg := hammerSwitch(ctx, l, sluice.Key(sluicetest.UniqueKey(t)), 8, logTo)

			time.Sleep(300 * time.Millisecond)
			phase.Store(&outage)
			time.Sleep(20 * time.Millisecond) // calls started while healthy finish first
			server.Kill()
			time.Sleep(700 * time.Millisecond)
			require.NoError(t, server.Restart())
			waitForState(t, l, fallback.BreakerClosed, 5*time.Second)
			// go-redis's pool, after PoolSize failed dials, fails fast and
			// probes once a second: the breaker may close on a probe and
			// open again before the pool dials. Recovered means the store
			// decides a run of calls.
			waitForStore(t, l, 5*time.Second)
			phase.Store(&recovered)
			time.Sleep(300 * time.Millisecond)
			stop()
			wg.Wait()

			t.Logf("healthy %+v", summary(&healthy))
			t.Logf("outage %+v", summary(&outage))
			t.Logf("recovered %+v", summary(&recovered))
			for _, log := range []*callLog{&healthy, &outage, &recovered} {
				require.Empty(t, log.errs, "no call returns an error")
				require.Zero(t, log.slow, "every call returns within timeout + 100 ms (slowest %s)", log.slowest)
			}
			require.Equal(t, healthy.calls, healthy.sources[sluice.SourceStore])
			require.Equal(t, outage.calls, outage.sources[sluice.SourceStore]+outage.sources[sluice.SourceFallbackClosed],
				"during the outage, the store or the Closed policy decides")
			require.Positive(t, outage.sources[sluice.SourceFallbackClosed])
			require.Equal(t, recovered.calls, recovered.sources[sluice.SourceStore], "after recovery, the store decides again")
			require.Positive(t, recovered.calls)
		})
	}
}

// TestStall: SIGSTOP the server (it keeps its connections but answers
// nothing): calls still return within the budget and follow the policy,
// and the goroutines waiting on the stalled server stay bounded.
func TestStall(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			server := redistest.StartRedis(t)
			l := chaosLimiter(t, b.newStore(t, server.Addr()), fallback.Open())
			key := sluice.Key(sluicetest.UniqueKey(t))
			_, err := l.AllowN(t.Context(), key, sluice.PerSecond(10), 1) // warm the connection
			require.NoError(t, err)
			base := runtime.NumGoroutine()

			server.Stall()
			stalled := true
			defer func() {
				if stalled {
					server.Resume()
				}
			}()
			ctx, stop := context.WithCancel(t.Context())
			var log callLog
			wg := hammer(ctx, l, key, 8, &log)
			peak := 0
			for range 20 {
				time.Sleep(50 * time.Millisecond)
				peak = max(peak, runtime.NumGoroutine())
			}
			stop()
			wg.Wait()
			server.Resume()
			stalled = false

			t.Logf("stalled: %+v, goroutines %d before, peak %d", summary(&log), base, peak)
			require.Empty(t, log.errs)
			require.Zero(t, log.slow, "every call returns within timeout + 100 ms (slowest %s)", log.slowest)
			require.Equal(t, log.calls, log.sources[sluice.SourceFallbackOpen]+log.sources[sluice.SourceStore])
			require.Positive(t, log.sources[sluice.SourceFallbackOpen])
			// 8 callers, and at most 5 + probes calls stuck on the server.
			require.Less(t, peak-base, 8+5+2+20, "goroutines stay bounded while stalled")

			waitForState(t, l, fallback.BreakerClosed, 5*time.Second)
			d, err := l.AllowN(t.Context(), key, sluice.PerSecond(10), 1)
			require.NoError(t, err)
			require.Equal(t, sluice.SourceStore, d.Source)
		})
	}
}

// TestOpenBreakerSendsNothing: with the breaker open no command reaches
// Redis (INFO commandstats), half-open probes are bounded, and the breaker
// closes once Redis is healthy. The failure is OOM (maxmemory tiny), which
// Redis answers, so that its command counts can be read throughout.
func TestOpenBreakerSendsNothing(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			server := redistest.StartRedis(t)
			var changes atomic.Int32
			l := chaosLimiter(t, b.newStore(t, server.Addr()), fallback.Closed(),
				fallback.WithBreaker(fallback.Breaker{Failures: 5, Cooldown: 500 * time.Millisecond, Probes: 2}),
				fallback.WithStateChange(func(_, _ fallback.BreakerState) { changes.Add(1) }))
			key := sluice.Key(sluicetest.UniqueKey(t))
			limit := sluice.PerSecond(1000)
			_, err := l.AllowN(t.Context(), key, limit, 1)
			require.NoError(t, err)

			_, err = server.Do("CONFIG", "SET", "maxmemory", "1")
			require.NoError(t, err)
			for l.Stats().Breaker != fallback.BreakerOpen {
				d, err := l.AllowN(t.Context(), key, limit, 1)
				require.NoError(t, err)
				require.Equal(t, sluice.SourceFallbackClosed, d.Source, "OOM maps to the policy")
			}
			before := scriptCommands(t, server)
			for range 100 {
				d, err := l.AllowN(t.Context(), key, limit, 1)
				require.NoError(t, err)
				require.Equal(t, sluice.SourceFallbackClosed, d.Source)
			}
			require.Equal(t, before, scriptCommands(t, server), "no command reaches Redis while the breaker is open")

			// Half-open, still OOM: the probes fail, and only they reach Redis.
			waitForState(t, l, fallback.BreakerHalfOpen, 2*time.Second)
			for range 50 {
				_, err := l.AllowN(t.Context(), key, limit, 1)
				require.NoError(t, err)
			}
			probes := scriptCommands(t, server) - before
			require.Positive(t, probes)
			require.LessOrEqual(t, probes, 2, "half-open lets at most 2 probes through")

			_, err = server.Do("CONFIG", "SET", "maxmemory", "0")
			require.NoError(t, err)
			waitForState(t, l, fallback.BreakerClosed, 5*time.Second)
			d, err := l.AllowN(t.Context(), key, limit, 1)
			require.NoError(t, err)
			require.Equal(t, sluice.SourceStore, d.Source)
			// closed->open, open->half-open, half-open->open, open->half-open, half-open->closed.
			require.Equal(t, int32(5), changes.Load(), "the hook fired once per state change")
		})
	}
}

// TestBusy: a long script from another client makes Redis answer BUSY;
// the calls follow the policy and the limiter recovers when it ends.
func TestBusy(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			server := redistest.StartRedis(t, "--busy-reply-threshold", "50")
			l := chaosLimiter(t, b.newStore(t, server.Addr()), fallback.Closed(), fallback.WithTimeout(time.Second))
			key := sluice.Key(sluicetest.UniqueKey(t))
			limit := sluice.PerSecond(1000)
			_, err := l.AllowN(t.Context(), key, limit, 1)
			require.NoError(t, err)

			busyDone := make(chan error, 1)
			go func() {
				_, err := server.Do("EVAL", "local t = redis.call('TIME') local s = tonumber(t[1]) while tonumber(redis.call('TIME')[1]) < s + 2 do end return 1", "0")
				busyDone <- err
			}()
			time.Sleep(200 * time.Millisecond)
			var busy callLog
			for range 10 {
				start := time.Now()
				d, err := l.AllowN(t.Context(), key, limit, 1)
				busy.record(time.Since(start), d, err)
			}
			t.Logf("busy: %+v", summary(&busy))
			require.Empty(t, busy.errs)
			require.Equal(t, 10, busy.sources[sluice.SourceFallbackClosed], "BUSY maps to the policy")
			require.NoError(t, <-busyDone)
			waitForState(t, l, fallback.BreakerClosed, 5*time.Second)
		})
	}
}

// TestLocalPolicyBound: N pods share a limit through one Redis; Redis dies
// for a while and comes back. During the outage each pod's Local policy
// admits at most its share, so the N pods together admit at most
// Burst + Rate × T over the outage; over the whole run, at most the store's
// bound plus the outage's (docs/failure.md).
func TestLocalPolicyBound(t *testing.T) {
	const pods = 4
	limit := sluice.Limit{Rate: 400, Period: time.Second, Burst: 40}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			server := redistest.StartRedis(t)
			store := b.newStore(t, server.Addr())
			key := sluice.Key(sluicetest.UniqueKey(t))
			limiters := make([]*fallback.Limiter, pods)
			for i := range limiters {
				local, err := tokenbucket.New(newMemStore(t))
				require.NoError(t, err)
				policy, err := fallback.Local(local, fallback.Replicas(pods))
				require.NoError(t, err)
				limiters[i] = chaosLimiter(t, store, policy)
			}
			var mu sync.Mutex
			// Admissions by phase and source: calls near the timeout can
			// fall back outside the outage too, under a loaded machine.
			phases := map[string]map[sluice.Source]int{"before": {}, "outage": {}, "after": {}}
			var outageStart, outageEnd time.Time
			run := func(phase string, d time.Duration) {
				count := phases[phase]
				ctx, stop := context.WithTimeout(t.Context(), d)
				defer stop()
				var wg sync.WaitGroup
				for _, l := range limiters {
					for range 4 {
						wg.Go(func() {
							for ctx.Err() == nil {
								dec, err := l.AllowN(context.Background(), key, limit, 1)
								if err != nil {
									t.Error(err)
									return
								}
								if dec.Allowed {
									mu.Lock()
									count[dec.Source]++
									mu.Unlock()
								}
							}
						})
					}
				}
				wg.Wait()
			}
			start := time.Now()
			run("before", 500*time.Millisecond)
			beforeEnd := time.Now()
			server.Kill()
			outageStart = time.Now()
			run("outage", time.Second)
			outageEnd = time.Now()
			require.NoError(t, server.Restart())
			for _, l := range limiters {
				waitForState(t, l, fallback.BreakerClosed, 5*time.Second)
			}
			run("after", 500*time.Millisecond)
			total := time.Since(start)
			// O: while the policy may decide, from the failure until the
			// calls after the restart succeed (go-redis fails once per
			// pooled connection to the dead server first).
			policyTime := time.Since(beforeEnd)

			outage := outageEnd.Sub(outageStart)
			bound := func(d time.Duration) float64 { return float64(limit.Burst) + float64(limit.Rate)*d.Seconds() }
			local, byStore := 0, 0
			for _, count := range phases {
				local += count[sluice.SourceFallbackLocal]
				byStore += count[sluice.SourceStore]
			}
			t.Logf("admitted by phase: %v; outage %s (bound %.0f), run %s (bound %.0f)", phases, outage, bound(outage), total, bound(total))
			require.Positive(t, phases["outage"][sluice.SourceFallbackLocal])
			require.LessOrEqual(t, float64(phases["outage"][sluice.SourceFallbackLocal]), bound(outage),
				"N pods × limit/N during the outage")
			// The restart lost Redis's data (no persistence): the store
			// starts over with a full bucket, one Burst more than its bound.
			fresh := float64(limit.Burst)
			require.LessOrEqual(t, float64(byStore), bound(total)+fresh, "the store's own bound, and a fresh bucket after the restart")
			require.LessOrEqual(t, float64(local), bound(policyTime), "the local shares add up to the limit")
			require.LessOrEqual(t, float64(byStore+local), bound(total)+fresh+bound(policyTime),
				"the documented bound across outage and recovery: (Burst + Rate × T) + Burst + (Burst + Rate × O)")
		})
	}
}

// scriptCommands is how many EVALSHA and EVAL commands the server has
// seen, including rejected and failed ones.
func scriptCommands(t *testing.T, server *redistest.RedisServer) int {
	total := 0
	for _, cmd := range []string{"cmdstat_evalsha", "cmdstat_eval"} {
		stats, err := server.Info("commandstats", cmd)
		if err != nil {
			continue // never called
		}
		for _, field := range strings.Split(stats, ",") {
			name, value, _ := strings.Cut(field, "=")
			if name == "calls" || name == "rejected_calls" || name == "failed_calls" {
				n, err := strconv.Atoi(value)
				require.NoError(t, err)
				total += n
			}
		}
	}
	return total
}

func waitForState(t *testing.T, l *fallback.Limiter, want fallback.BreakerState, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for l.Stats().Breaker != want {
		if time.Now().After(deadline) {
			t.Fatalf("breaker %s, want %s after %s", l.Stats().Breaker, want, within)
		}
		// Calls drive the breaker's transitions out of half-open.
		_, _ = l.AllowN(t.Context(), "probe", sluice.PerSecond(1_000_000), 1)
		time.Sleep(10 * time.Millisecond)
	}
}

// waitForStore waits until 20 calls in a row are decided by the store.
func waitForStore(t *testing.T, l *fallback.Limiter, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for run := 0; run < 20; {
		d, err := l.AllowN(t.Context(), "probe", sluice.PerSecond(1_000_000), 1)
		if err == nil && d.Source == sluice.SourceStore {
			run++
			continue
		}
		run = 0
		if time.Now().After(deadline) {
			t.Fatalf("the store did not decide 20 calls in a row within %s", within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type switchLog struct{ phase *atomic.Pointer[callLog] }

func hammerSwitch(ctx context.Context, l sluice.Limiter, key string, goroutines int, s *switchLog) *sync.WaitGroup {
	var wg sync.WaitGroup
	limit := sluice.PerSecond(1_000_000)
	for g := range goroutines {
		wg.Go(func() {
			k := key + ":" + strconv.Itoa(g%4)
			for ctx.Err() == nil {
				log := s.phase.Load()
				start := time.Now()
				d, err := l.AllowN(context.Background(), k, limit, 1)
				log.record(time.Since(start), d, err)
				time.Sleep(time.Millisecond)
			}
		})
	}
	return &wg
}

func summary(c *callLog) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("%d calls, slowest %s, %d over budget, sources %v, %d errors", c.calls, c.slowest, c.slow, c.sources, len(c.errs))
}
