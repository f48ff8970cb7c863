package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/sluicetest/builtins"
	"github.com/sluicehq/sluice/sluicetest/redistest"
	"github.com/sluicehq/sluice/store/goredisstore"
)

// TestServersSharingOneRedisKeepOneLimit: three sluice-serve processes on
// one redis-server, 4 callers each on one descriptor for 2 s, admit
// together at most Burst + Rate × T (the token bucket's bound; T from the
// first call's start to the last one's end), and at least 80% of
// Burst + Rate × S, S the part of T over which the calls show the bucket
// saturated (builtins.Saturated: a loaded machine's stalls leave the
// refill unclaimed for want of calls, not for a fault of the bucket).
func TestServersSharingOneRedisKeepOneLimit(t *testing.T) {
	server := redistest.StartRedis(t)
	config := "domain: edge\npolicies:\n  - {name: p, match: [{key: user}], rate: 100, period: 1s, burst: 50}\n"
	limit := sluice.Limit{Rate: 100, Period: time.Second, Burst: 50}
	var procs []*proc
	for range 3 {
		procs = append(procs, start(t, config, "--redis", server.URL()))
	}
	var errs atomic.Int64
	calls := make([][]builtins.Call, 3*4)
	stop := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	for i := range calls {
		p := procs[i/4]
		wg.Go(func() {
			for time.Now().Before(stop) {
				began := time.Now().UnixNano()
				resp, err := ask(p, "user", "u1")
				if err != nil {
					errs.Add(1)
					continue
				}
				calls[i] = append(calls[i], builtins.Call{Start: began, End: time.Now().UnixNano(),
					Allowed: resp.GetOverallCode() == rlsv3.RateLimitResponse_OK})
			}
		})
	}
	wg.Wait()
	all := slices.Concat(calls...)
	slices.SortFunc(all, func(a, b builtins.Call) int { return cmp.Compare(a.Start, b.Start) })
	admitted := float64(len(builtins.Allowed(all)))
	elapsed := builtins.Span(all)
	bound := float64(limit.Burst) + float64(limit.Rate)*elapsed.Seconds()
	saturated := builtins.Saturated(all, time.Duration(limit.Burst-1)*limit.Period/time.Duration(limit.Rate))
	owed := float64(limit.Burst) + float64(limit.Rate)*saturated.Seconds()
	t.Logf("3 servers admitted %.0f in %s against a bound of %.1f; saturated %s, owed %.1f", admitted, elapsed.Round(time.Millisecond), bound,
		saturated.Round(time.Millisecond), owed)
	require.Zero(t, errs.Load())
	require.LessOrEqual(t, admitted, bound)
	require.GreaterOrEqual(t, admitted, 0.8*owed)
}

// TestKillingRedisFollowsThePolicy: kill -9 the redis-server under load:
// a policy with fallback open keeps answering OK, one with fallback closed
// OVER_LIMIT, with no gRPC error and each call within a second; after a
// restart the store decides again (its answers carry the RateLimit field
// again, which a fallback's do not).
func TestKillingRedisFollowsThePolicy(t *testing.T) {
	server := redistest.StartRedis(t)
	config := `domain: edge
policies:
  - {name: open, match: [{key: user}], rate: 1000000, period: 1s, fallback: open, fallback_timeout: 50ms}
  - {name: closed, match: [{key: tenant}], rate: 1000000, period: 1s, fallback: closed, fallback_timeout: 50ms}
`
	p := start(t, config, "--redis", server.URL())
	fromStore := func(resp *rlsv3.RateLimitResponse) bool {
		for _, h := range resp.GetResponseHeadersToAdd() {
			if h.GetKey() == "RateLimit" {
				return true
			}
		}
		return false
	}
	type tally struct{ calls, ok, over, store, errs, slow atomic.Int64 }
	var phase atomic.Pointer[[2]*tally]
	healthy, outage, recovered := [2]*tally{{}, {}}, [2]*tally{{}, {}}, [2]*tally{{}, {}}
	phase.Store(&healthy)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i, key := range []string{"user", "tenant"} {
		for range 2 {
			wg.Go(func() {
				for ctx.Err() == nil {
					tl := phase.Load()[i]
					began := time.Now()
					resp, err := ask(p, key, "k")
					tl.calls.Add(1)
					if time.Since(began) > time.Second {
						tl.slow.Add(1)
					}
					switch {
					case err != nil:
						tl.errs.Add(1)
					case resp.GetOverallCode() == rlsv3.RateLimitResponse_OK:
						tl.ok.Add(1)
					default:
						tl.over.Add(1)
					}
					if err == nil && fromStore(resp) {
						tl.store.Add(1)
					}
					time.Sleep(2 * time.Millisecond)
				}
			})
		}
	}
	time.Sleep(300 * time.Millisecond)
	phase.Store(&[2]*tally{{}, {}}) // the kill: not counted
	time.Sleep(50 * time.Millisecond)
	server.Kill()
	time.Sleep(100 * time.Millisecond) // calls begun before the kill end first
	phase.Store(&outage)
	time.Sleep(700 * time.Millisecond)
	phase.Store(&[2]*tally{{}, {}}) // the restart: not counted
	require.NoError(t, server.Restart())
	deadline := time.Now().Add(15 * time.Second)
	for {
		// Each policy has a breaker of its own: both must be closed again.
		open, errOpen := ask(p, "user", "probe")
		closed, errClosed := ask(p, "tenant", "probe")
		if errOpen == nil && errClosed == nil && fromStore(open) && fromStore(closed) {
			break
		}
		require.True(t, time.Now().Before(deadline), "the store decides again within 15 s of the restart")
		time.Sleep(50 * time.Millisecond)
	}
	phase.Store(&recovered)
	time.Sleep(300 * time.Millisecond)
	cancel()
	wg.Wait()

	for i, name := range []string{"open", "closed"} {
		h, o, r := healthy[i], outage[i], recovered[i]
		t.Logf("%s: healthy %d calls (%d from the store), outage %d calls (%d OK, %d OVER_LIMIT), recovered %d calls (%d from the store)",
			name, h.calls.Load(), h.store.Load(), o.calls.Load(), o.ok.Load(), o.over.Load(), r.calls.Load(), r.store.Load())
		for _, tl := range []*tally{h, o, r} {
			require.Zero(t, tl.errs.Load(), "%s: no gRPC error", name)
			require.Zero(t, tl.slow.Load(), "%s: every call within a second", name)
		}
		require.Positive(t, o.calls.Load())
		require.Zero(t, o.store.Load(), "%s: during the outage the fallback decides", name)
		require.Equal(t, h.calls.Load(), h.store.Load())
		require.Equal(t, r.calls.Load(), r.store.Load(), "%s: after the restart the store decides", name)
		require.Positive(t, r.calls.Load())
	}
	require.Equal(t, outage[0].calls.Load(), outage[0].ok.Load(), "open: every outage call OK")
	require.Equal(t, outage[1].calls.Load(), outage[1].over.Load(), "closed: every outage call OVER_LIMIT")
}

// TestReloadKeepsServing: SIGHUP under load swaps the policies without a
// failed call, one reload per signal; a file that does not build is
// refused, logged, and the policies in force are kept.
func TestReloadKeepsServing(t *testing.T) {
	policy := func(rate int) string {
		return fmt.Sprintf("domain: edge\npolicies:\n  - {name: p, match: [{key: user}], rate: %d, period: 1m, lease: 5}\n", rate)
	}
	// No poll (--watch 0): a poll of the file would reload it too, and
	// log the same line, between a write and its SIGHUP.
	p := start(t, policy(1000), "--watch", "0")
	var calls, errs atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				_, err := ask(p, "user", fmt.Sprint("u", g))
				calls.Add(1)
				if err != nil {
					errs.Add(1)
				}
			}
		})
	}
	reloads := func() int { return strings.Count(p.logs(), "sluice serve: reloaded") }
	for i := range 6 {
		time.Sleep(100 * time.Millisecond)
		require.NoError(t, os.WriteFile(p.config, []byte(policy(1000+i)), 0o600))
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
		// One signal at a time: two sent during one reload would be one.
		require.Eventually(t, func() bool { return reloads() >= i+1 }, 20*time.Second, 5*time.Millisecond, p.logs())
	}
	require.NoError(t, os.WriteFile(p.config, []byte("domain: edge\npolicies:\n  - {name: p, match: [{key: user}], rate: 0, period: 1m}\n"), 0o600))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return strings.Contains(p.logs(), "reload refused; the policies in force are kept") }, 20*time.Second, 5*time.Millisecond, p.logs())
	time.Sleep(100 * time.Millisecond) // calls on the policies kept
	cancel()
	wg.Wait()
	require.Positive(t, calls.Load())
	require.Zero(t, errs.Load(), "no call failed across %d reloads", 6)
	require.Equal(t, 6, reloads())
	resp, err := ask(p, "user", "after")
	require.NoError(t, err)
	require.Equal(t, uint32(1005), resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit(), "the last good file's limit")
}

// TestShutdownReturnsLeasedTokens: SIGTERM drains and closes the leases: the
// tokens a lease took and did not spend go back to the bucket in Redis,
// and the process exits 0.
func TestShutdownReturnsLeasedTokens(t *testing.T) {
	server := redistest.StartRedis(t)
	p := start(t, "domain: edge\npolicies:\n  - {name: p, match: [{key: user}], rate: 1, period: 1h, burst: 100, lease: 10}\n",
		"--redis", server.URL())
	resp, err := ask(p, "user", "u1")
	require.NoError(t, err)
	require.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode())

	client := redis.NewClient(&redis.Options{Addr: server.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	store, err := goredisstore.New(client)
	require.NoError(t, err)
	bucket, err := tokenbucket.New(store)
	require.NoError(t, err)
	key := sluice.Key("u1", "serve", "edge", "p")
	limit := sluice.Limit{Rate: 1, Period: time.Hour, Burst: 100}
	before, err := bucket.AllowN(context.Background(), key, limit, 0)
	require.NoError(t, err)
	require.LessOrEqual(t, before.Remaining, int64(90), "the lease holds its batch")

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, p.wait(t), p.logs())
	require.Contains(t, p.logs(), "sluice serve: stopped")
	after, err := bucket.AllowN(context.Background(), key, limit, 0)
	require.NoError(t, err)
	t.Logf("bucket: %d while leased, %d after the shutdown", before.Remaining, after.Remaining)
	require.Equal(t, int64(99), after.Remaining, "only the one token spent is gone")
}

// TestStartupErrors: a bad policy file, an unreachable Redis and a missing
// flag are clear errors, and the process exits 1 (2 for a usage error).
func TestStartupErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		config string
		args   []string
		code   int
		want   string
	}{
		{"bad file", "policies:\n  - {name: p, match: [{key: u}], rate: 5, period: soon}\n", nil, 1, `policy 1 ("p"): period: "soon"`},
		{"unreachable Redis", "policies:\n  - {name: p, match: [{key: u}], rate: 5, period: 1s}\n", []string{"--redis", "redis://127.0.0.1:1/0"}, 1, "Redis does not answer"},
		{"a bad Redis URL", "policies:\n  - {name: p, match: [{key: u}], rate: 5, period: 1s}\n", []string{"--redis", "mysql://x"}, 1, "--redis"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := launch(t, c.config, c.args...)
			require.Equal(t, c.code, p.wait(t))
			require.Contains(t, p.logs(), c.want)
		})
	}
	out, err := exec.Command(binary, "--watch", "1s").CombinedOutput() // with no argument at all: envoy.go's mode
	require.Error(t, err)
	require.Equal(t, 2, err.(*exec.ExitError).ExitCode())
	require.Contains(t, string(out), "--config is required")
}

// TestAChangedFileIsReloaded: the policy file replaced as a Kubernetes
// ConfigMap volume replaces it (a new file renamed over it, no signal) is
// reloaded within the --watch interval; a replacement that does not build
// is refused and logged, and the policies in force kept.
func TestAChangedFileIsReloaded(t *testing.T) {
	policy := func(rate int) string {
		return fmt.Sprintf("domain: edge\npolicies:\n  - {name: p, match: [{key: user}], rate: %d, period: 1h}\n", rate)
	}
	p := start(t, policy(1), "--watch", "50ms")
	replace := func(content string) {
		tmp := p.config + ".new"
		require.NoError(t, os.WriteFile(tmp, []byte(content), 0o600))
		require.NoError(t, os.Rename(tmp, p.config))
	}
	resp, err := ask(p, "user", "u1")
	require.NoError(t, err)
	require.Equal(t, rlsv3.RateLimitResponse_OK, resp.GetOverallCode())
	resp, err = ask(p, "user", "u1")
	require.NoError(t, err)
	require.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.GetOverallCode(), "1 an hour")

	replace(policy(100))
	require.Eventually(t, func() bool { return strings.Contains(p.logs(), `msg="sluice serve: reloaded"`) }, 20*time.Second, 10*time.Millisecond, p.logs())
	resp, err = ask(p, "user", "u2")
	require.NoError(t, err)
	require.Equal(t, uint32(99), resp.GetStatuses()[0].GetLimitRemaining(), "100 an hour now")

	replace("domain: edge\npolicies:\n  - {name: p, match: [{key: user}], rate: 0, period: 1h}\n")
	require.Eventually(t, func() bool { return strings.Contains(p.logs(), "does not build; the policies in force are kept") }, 20*time.Second, 10*time.Millisecond, p.logs())
	resp, err = ask(p, "user", "u2")
	require.NoError(t, err)
	require.Equal(t, uint32(98), resp.GetStatuses()[0].GetLimitRemaining(), "still 100 an hour")
}
