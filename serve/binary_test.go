//go:build unix

package serve_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms/fixedwindow"
	"github.com/sluicehq/sluice/algorithms/gcra"
	"github.com/sluicehq/sluice/algorithms/slidingcounter"
	"github.com/sluicehq/sluice/algorithms/slidinglog"
	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/serve"
	"github.com/sluicehq/sluice/sluicetest/builtins"
	"github.com/sluicehq/sluice/sluicetest/redistest"
)

// TestServeBinary builds sluice-serve once and runs the tests of the
// running binary on real redis-servers, one after the other (the bound
// test wants the machine to itself).
func TestServeBinary(t *testing.T) {
	redistest.RequireRedisServer(t)
	bin := filepath.Join(t.TempDir(), "sluice-serve")
	build := exec.Command("go", "build", "-o", bin, "./cmd/sluice-serve")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/sluice-serve:\n%s", out)
	for _, c := range []struct {
		name string
		test func(*testing.T, string)
	}{
		{"EveryAlgorithmOnRedis", testEveryAlgorithmOnRedis},
		{"BucketBoundInEveryWindow", testBucketBoundInEveryWindow},
		{"SIGTERMDrainsACallInFlight", testSIGTERMDrainsACallInFlight},
		{"ReadyzAndMetricsWithRedisKilled", testReadyzAndMetricsWithRedisKilled},
		{"InstalledSluiceServePassesSignalsOn", testInstalledSluiceServePassesSignalsOn},
	} {
		t.Run(c.name, func(t *testing.T) { c.test(t, bin) })
	}
}

// testInstalledSluiceServePassesSignalsOn: the sluice command, installed
// beside sluice-serve (as go install puts both in GOBIN) and run outside
// any checkout, runs that sluice-serve: SIGTERM or SIGINT sent to sluice
// reaches it, which drains and stops, and sluice exits 0 after it; SIGHUP
// sent to sluice reaches it too, which reloads its policy file and goes on
// serving.
func testInstalledSluiceServePassesSignalsOn(t *testing.T, serveBin string) {
	sluiceBin := filepath.Join(filepath.Dir(serveBin), "sluice")
	build := exec.Command("go", "build", "-o", sluiceBin, "github.com/sluicehq/sluice/cmd/sluice")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build sluice:\n%s", out)
	server := redistest.StartRedis(t)
	config := "domain: edge\npolicies:\n  - {name: p, match: [{key: user}], rate: 5, period: 1s}\n"
	t.Chdir(t.TempDir()) // no checkout here: sluice cannot fall back to go run
	t.Run("hangup", func(t *testing.T) {
		// 5 an hour: no refill between the two calls.
		hourly := "domain: edge\npolicies:\n  - {name: p, match: [{key: user}], rate: 5, period: 1h}\n"
		p := startServeAs(t, []string{sluiceBin, "serve"}, hourly, server.URL())
		resp, err := p.decide(descriptor("user", "hup"))
		require.NoError(t, err)
		require.Equal(t, ok, resp.GetOverallCode())
		// The file does not change, so the watch (every second) reloads
		// nothing: a reload is SIGHUP's, logged with no on=change.
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
		p.waitLog(t, `msg="sluice serve: reloaded"`)
		require.NotContains(t, p.log(), "on=change")
		require.NotContains(t, p.log(), "shutting down", "SIGHUP stopped the server")
		resp, err = p.decide(descriptor("user", "hup"))
		require.NoError(t, err, "still serving after SIGHUP")
		require.Equal(t, ok, resp.GetOverallCode())
		require.Equal(t, uint32(3), resp.GetStatuses()[0].GetLimitRemaining(), "the same limit, its state kept")
		select {
		case <-p.done:
			t.Fatalf("sluice exited (%d) after SIGHUP", p.exitCode)
		default:
		}
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		p.waitLog(t, "sluice serve: stopped")
		require.Equal(t, 0, p.wait(t))
	})
	for _, sig := range []os.Signal{syscall.SIGTERM, os.Interrupt} {
		t.Run(sig.String(), func(t *testing.T) {
			p := startServeAs(t, []string{sluiceBin, "serve"}, config, server.URL())
			resp, err := p.decide(descriptor("user", "u1"))
			require.NoError(t, err)
			require.Equal(t, ok, resp.GetOverallCode())
			require.NoError(t, p.cmd.Process.Signal(sig))
			p.waitLog(t, "shutting down: draining the calls in flight")
			p.waitLog(t, "sluice serve: stopped")
			require.Equal(t, 0, p.wait(t))
		})
	}
}

// testEveryAlgorithmOnRedis holds that the running binary on a real
// redis-server, asked through go-control-plane's client, decides each of
// the five algorithms: 3 OK then OVER_LIMIT with 3 a MINUTE as
// current_limit and Retry-After, the state under sluice.Key(value,
// "serve", domain, policy) plus the algorithm's suffix on Redis; and that
// its HTTP listener serves /healthz, /readyz ("ok") and POST /v1/allow on
// the same key (good and bad requests).
func testEveryAlgorithmOnRedis(t *testing.T, bin string) {
	server := redistest.StartRedis(t)
	suffixes := map[string]string{
		"tokenbucket": tokenbucket.KeySuffix, "gcra": gcra.KeySuffix, "fixedwindow": fixedwindow.KeySuffix,
		"slidingcounter": slidingcounter.KeySuffix, "slidinglog": slidinglog.KeySuffix,
	}
	var config strings.Builder
	config.WriteString("domain: edge\npolicies:\n")
	for alg := range suffixes {
		fmt.Fprintf(&config, "  - {name: %s-3, match: [{key: %s}], algorithm: %s, rate: 3, period: 1m}\n", alg, alg, alg)
	}
	p := startServe(t, bin, config.String(), server.URL())
	client := newRedisClient(t, server.Addr())

	for alg, suffix := range suffixes {
		var codes []rlsv3.RateLimitResponse_Code
		var last *rlsv3.RateLimitResponse
		for range 4 {
			resp, err := p.decide(descriptor(alg, "tenant:1"))
			require.NoError(t, err, alg)
			codes = append(codes, resp.GetOverallCode())
			last = resp
		}
		require.Equal(t, []rlsv3.RateLimitResponse_Code{ok, ok, ok, over}, codes, alg)
		st := last.GetStatuses()[0]
		require.Equal(t, alg+"-3", st.GetCurrentLimit().GetName())
		require.Equal(t, uint32(3), st.GetCurrentLimit().GetRequestsPerUnit(), alg)
		require.Equal(t, rlsv3.RateLimitResponse_RateLimit_MINUTE, st.GetCurrentLimit().GetUnit(), alg)
		require.NotEmpty(t, headerOf(last, "Retry-After"), alg)
		key := sluice.Key("tenant:1", "serve", "edge", alg+"-3") + suffix
		n, err := client.Exists(t.Context(), key).Result()
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "%s: the state is on Redis as %s", alg, key)

		// /v1/allow's key is the one-entry descriptor's: spent already.
		code, body := p.postAllow(t, fmt.Sprintf(`{"policy": %q, "key": "tenant:1"}`, alg+"-3"))
		require.Equal(t, http.StatusOK, code, body)
		var d serve.AllowResponse
		require.NoError(t, json.Unmarshal([]byte(body), &d))
		require.False(t, d.Allowed, "%s: %s", alg, body)
		require.Equal(t, "store", d.Source)
	}

	code, body := p.postAllow(t, `{"policy": "gcra-3", "key": "fresh"}`)
	require.Equal(t, http.StatusOK, code, body)
	var d serve.AllowResponse
	require.NoError(t, json.Unmarshal([]byte(body), &d))
	require.Equal(t, serve.AllowResponse{Allowed: true, Remaining: 2, ResetAfterMs: d.ResetAfterMs, Source: "store"}, d)
	for _, bad := range []struct{ body, want string }{
		{`{"policy": "nope", "key": "k"}`, `unknown \"nope\"`},
		{`{"policy": "gcra-3", "key": ""}`, "key: empty"},
		{`{"policy": "gcra-3", "key": "fresh", "cost": 4}`, "cost"},
		{`{"policy": "gcra-3", "key": "fresh", "hits": 1}`, `unknown field \"hits\"`},
	} {
		code, body := p.postAllow(t, bad.body)
		require.Equal(t, http.StatusBadRequest, code, bad.body)
		require.Contains(t, body, bad.want, bad.body)
	}
	code, body = p.postAllow(t, `{"policy": "gcra-3", "key": "fresh"}`)
	require.Equal(t, http.StatusOK, code, body)
	require.NoError(t, json.Unmarshal([]byte(body), &d))
	require.Equal(t, int64(1), d.Remaining, "the bad requests consumed nothing")

	code, body = p.get(t, "/healthz")
	require.Equal(t, http.StatusOK, code, body)
	code, body = p.get(t, "/readyz")
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "ok\n", body)
}

// testBucketBoundInEveryWindow holds that three sluice-serve processes
// sharing one redis-server keep one token bucket (100 per second, burst
// 50): 4 callers per process hammering one descriptor for about 2 s are
// admitted together at most Burst + Rate x d within any interval of length
// d (100 ms, 250 ms, 500 ms, 1 s, the whole run), counting only calls whose
// whole [start, end] lies inside it, so the bound cannot be overstated; at
// least 90% of Burst + Rate x S, S the part of the run over which the calls
// show the bucket saturated (builtins.Saturated: a loaded machine that
// gives the callers or the servers no CPU for a while leaves the refill
// unclaimed for want of calls, not for a fault of the bucket); by every
// process; and with no gRPC error.
func testBucketBoundInEveryWindow(t *testing.T, bin string) {
	server := redistest.StartRedis(t)
	limit := sluice.Limit{Rate: 100, Period: time.Second, Burst: 50}
	config := "domain: edge\npolicies:\n  - {name: shared, match: [{key: tenant}], algorithm: tokenbucket, rate: 100, period: 1s, burst: 50}\n"
	procs := make([]*serveProc, 3)
	for i := range procs {
		procs[i] = startServe(t, bin, config, server.URL())
	}
	// Warm each process's connections on another key, so that dials do
	// not sit in the measured calls.
	for _, p := range procs {
		resp, err := p.decide(descriptor("tenant", "warm-up"))
		require.NoError(t, err)
		require.Equal(t, ok, resp.GetOverallCode())
	}

	const perProcess = 4
	calls := make([][]builtins.Call, len(procs)*perProcess)
	errs := make([]error, len(calls))
	stop := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	for i := range calls {
		p := procs[i/perProcess]
		wg.Go(func() {
			for time.Now().Before(stop) {
				start := time.Now().UnixNano()
				resp, err := p.decide(descriptor("tenant", "hot"))
				end := time.Now().UnixNano()
				if err != nil {
					errs[i] = err
					return
				}
				calls[i] = append(calls[i], builtins.Call{Start: start, End: end, Allowed: resp.GetOverallCode() == ok})
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))

	var all []builtins.Call
	perProc := make([]int, len(procs))
	for i, cs := range calls {
		all = append(all, cs...)
		perProc[i/perProcess] += len(builtins.Allowed(cs))
	}
	slices.SortFunc(all, func(a, b builtins.Call) int { return int(a.Start - b.Start) })
	allowed := builtins.Allowed(all)
	span := builtins.Span(all)
	bound := float64(limit.Burst) + float64(limit.Rate)*span.Seconds()
	excess, at := builtins.BucketExcess(allowed, limit, 100*time.Millisecond, 250*time.Millisecond, 500*time.Millisecond, time.Second, span+time.Nanosecond)
	t.Logf("3 servers, %d calls in %s: %d allowed (by server %v) against Burst + Rate x T = %.1f; the largest excess over Burst + Rate x d in any window: %.1f (d = %s)",
		len(all), span.Round(time.Millisecond), len(allowed), perProc, bound, excess, at)
	require.LessOrEqual(t, float64(len(allowed)), bound, "the three servers together keep the bucket's bound")
	require.LessOrEqual(t, excess, 0.0, "no window admits more than Burst + Rate x d")
	saturated := builtins.Saturated(all, time.Duration(limit.Burst-1)*limit.Period/time.Duration(limit.Rate))
	owed := float64(limit.Burst) + float64(limit.Rate)*saturated.Seconds()
	t.Logf("saturated %s of the run: owed %.1f", saturated.Round(time.Millisecond), owed)
	require.GreaterOrEqual(t, float64(len(allowed)), 0.9*owed, "the limit is shared, not starved")
	require.Greater(t, len(all), 2*len(allowed), "the load is well over the limit")
	for i, n := range perProc {
		require.Positive(t, n, "server %d admitted calls", i)
	}
}

// testSIGTERMDrainsACallInFlight holds that SIGTERM lets a call already in
// flight finish: with the redis-server stalled (SIGSTOP) a call waits in the
// server; after SIGTERM the process keeps running (draining) and refuses
// new calls (Unavailable), and once Redis resumes the call in flight is
// answered OK, the store having decided it, and the process exits 0. A
// SIGTERM or SIGINT sent during the drain is logged and changes nothing.
func testSIGTERMDrainsACallInFlight(t *testing.T, bin string) {
	server := redistest.StartRedis(t)
	p := startServe(t, bin, "domain: edge\npolicies:\n  - {name: plain, match: [{key: user}], rate: 10, period: 1m}\n", server.URL())
	resp, err := p.decide(descriptor("user", "u1"))
	require.NoError(t, err)
	require.Equal(t, uint32(9), resp.GetStatuses()[0].GetLimitRemaining())

	server.Stall()
	t.Cleanup(server.Resume)
	type answer struct {
		resp *rlsv3.RateLimitResponse
		err  error
		at   time.Time
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := p.decide(descriptor("user", "u1"))
		answered <- answer{resp, err, time.Now()}
	}()
	select {
	case a := <-answered:
		t.Fatalf("the call was answered while Redis was stalled: %v %v", a.resp, a.err)
	case <-time.After(300 * time.Millisecond): // in flight, waiting for Redis
	}
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	p.waitLog(t, "shutting down: draining the calls in flight")
	// Signals sent again do not cut the drain: the kernel sends SIGTERM
	// once per thread of a parent that dies (Pdeathsig), and an operator
	// may press Ctrl-C twice.
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
	p.waitLog(t, "signal=interrupt")

	// A new call on another connection is refused: the listener is closed.
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor("user", "u2")}})
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)

	select {
	case <-p.done:
		t.Fatalf("sluice-serve exited (%d) with a call in flight", p.exitCode)
	case a := <-answered:
		t.Fatalf("the call was answered while Redis was stalled: %v %v", a.resp, a.err)
	case <-time.After(200 * time.Millisecond):
	}
	resumed := time.Now()
	server.Resume()
	a := <-answered
	require.NoError(t, a.err, "the call in flight is served, not cut")
	require.False(t, a.at.Before(resumed))
	require.Equal(t, ok, a.resp.GetOverallCode())
	require.Equal(t, uint32(8), a.resp.GetStatuses()[0].GetLimitRemaining(), "decided by the store")
	require.Equal(t, 0, p.wait(t))
	require.Contains(t, p.log(), "sluice serve: stopped")
}

// seriesSum returns the sum of the values of every series of metric name
// in a Prometheus exposition, failing t when there is none.
func seriesSum(t *testing.T, exposition, name string) float64 {
	t.Helper()
	var sum float64
	found := false
	for line := range strings.SplitSeq(exposition, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		require.NoError(t, err, line)
		sum, found = sum+v, true
	}
	require.True(t, found, "no series of %s in\n%s", name, exposition)
	return sum
}

// metricValue returns the value of the sluice_decisions_total series of
// policy, source and outcome in a Prometheus exposition, or 0 without one.
func metricValue(t *testing.T, exposition, policy, source, outcome string) float64 {
	t.Helper()
	for line := range strings.SplitSeq(exposition, "\n") {
		if !strings.HasPrefix(line, "sluice_decisions_total{") || !strings.Contains(line, `sluice_policy="`+policy+`"`) ||
			!strings.Contains(line, `sluice_source="`+source+`"`) || !strings.Contains(line, `sluice_outcome="`+outcome+`"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		require.NoError(t, err, line)
		return v
	}
	return 0
}

// testReadyzAndMetricsWithRedisKilled holds, on two processes sharing a
// redis-server that is then killed with SIGKILL: /readyz is 200 "ok"
// while Redis answers; after the kill it stays 200 ("degraded") on the
// process whose every policy has an open or local fallback and turns 503,
// naming the policy, on the one with a closed fallback; the fallbacks decide
// (open and local OK, closed OVER_LIMIT, no gRPC error); and each process's
// /metrics counts exactly those decisions in sluice_decisions_total by
// policy, source (store, fallback-open, fallback-local, fallback-closed)
// and outcome, and sluice_redis_connections_* its Redis connections: at
// least one open and none closed while Redis answers, at least one closed
// once the kill broke them.
func testReadyzAndMetricsWithRedisKilled(t *testing.T, bin string) {
	server := redistest.StartRedis(t)
	lenient := startServe(t, bin, `domain: edge
policies:
  - {name: open-p, match: [{key: user}], rate: 100, period: 1m, fallback: open, fallback_timeout: 50ms}
  - {name: local-p, match: [{key: ip}], algorithm: gcra, rate: 100, period: 1m, fallback: local, replicas: 2, fallback_timeout: 50ms}
`, server.URL())
	strict := startServe(t, bin, `domain: edge
policies:
  - {name: open-p, match: [{key: user}], rate: 100, period: 1m, fallback: open, fallback_timeout: 50ms}
  - {name: closed-p, match: [{key: tenant}], algorithm: fixedwindow, rate: 100, period: 1m, fallback: closed, fallback_timeout: 50ms}
`, server.URL())
	ask := func(p *serveProc, d *ratelimitv3.RateLimitDescriptor, want rlsv3.RateLimitResponse_Code, fromStore bool) {
		t.Helper()
		start := time.Now()
		resp, err := p.decide(d)
		require.NoError(t, err)
		require.Less(t, time.Since(start), 2*time.Second)
		require.Equal(t, want, resp.GetOverallCode(), "%v", d)
		require.Equal(t, fromStore, headerOf(resp, "RateLimit") != "", "%v: decided by the store: %v", d, fromStore)
	}
	const healthy, outage = 3, 7
	for range healthy {
		ask(lenient, descriptor("user", "u"), ok, true)
		ask(lenient, descriptor("ip", "10.0.0.1"), ok, true)
		ask(strict, descriptor("tenant", "t"), ok, true)
	}
	for _, p := range []*serveProc{lenient, strict} {
		code, body := p.get(t, "/readyz")
		require.Equal(t, http.StatusOK, code, body)
		require.Equal(t, "ok\n", body)
	}

	// The Redis client's connections, counted as the client makes and
	// closes them (redisconn.Conns).
	_, metrics := lenient.get(t, "/metrics")
	require.GreaterOrEqual(t, seriesSum(t, metrics, "sluice_redis_connections_open"), 1.0, metrics)
	require.Zero(t, seriesSum(t, metrics, "sluice_redis_connections_closed_total"), "none broken yet:\n%s", metrics)

	server.Kill()
	for range outage {
		ask(lenient, descriptor("user", "u"), ok, false)
		ask(lenient, descriptor("ip", "10.0.0.1"), ok, false)
		ask(strict, descriptor("tenant", "t"), over, false)
	}
	code, body := lenient.get(t, "/readyz")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "degraded")
	code, body = strict.get(t, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	require.Contains(t, body, `["closed-p"]`, "names the policy that cannot decide without Redis")

	_, metrics = lenient.get(t, "/metrics")
	require.GreaterOrEqual(t, seriesSum(t, metrics, "sluice_redis_connections_closed_total"), 1.0,
		"the connections Redis's death broke are closed:\n%s", metrics)
	for _, c := range []struct {
		policy, source, outcome string
		want                    float64
	}{
		{"open-p", "store", "allowed", healthy},
		{"open-p", "fallback-open", "allowed", outage},
		{"local-p", "store", "allowed", healthy},
		{"local-p", "fallback-local", "allowed", outage},
		{"open-p", "store", "denied", 0},
	} {
		require.Equal(t, c.want, metricValue(t, metrics, c.policy, c.source, c.outcome), "lenient %+v", c)
	}
	_, metrics = strict.get(t, "/metrics")
	require.Equal(t, float64(healthy), metricValue(t, metrics, "closed-p", "store", "allowed"))
	require.Equal(t, float64(outage), metricValue(t, metrics, "closed-p", "fallback-closed", "denied"))
	require.Zero(t, metricValue(t, metrics, "open-p", "store", "allowed"), "no call on the strict server's open-p")
}
