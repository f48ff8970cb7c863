package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

var envoyListening = regexp.MustCompile(`msg="sluice-serve: listening" grpc=(\S+) http=(\S+) debug=(\S+)(?: prometheus=(\S+))?`)

// envoyProc is sluice-serve in the compatible mode, with its addresses.
type envoyProc struct {
	*proc
	http, debug, prometheus string
	health                  healthpb.HealthClient
}

// limits is a configuration of domain edge: requests_per_unit n an hour
// for the key user.
func limits(n int) string {
	return fmt.Sprintf("domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: %d}\n", n)
}

// runtimeRoot lays out <base>/<version>/ratelimit/config/limits.yaml and
// returns the directory of that version.
func runtimeVersion(t *testing.T, base, version, content string) string {
	t.Helper()
	dir := filepath.Join(base, version)
	writeFile(t, filepath.Join(dir, "ratelimit", "config", "limits.yaml"), content)
	return dir
}

// runtimeEnv makes RUNTIME_ROOT=<base>/current a symlink to version v1
// holding content, and returns base and the variables naming it.
func runtimeEnv(t *testing.T, content string) (string, []string) {
	base := t.TempDir()
	require.NoError(t, os.Symlink(runtimeVersion(t, base, "v1", content), filepath.Join(base, "current")))
	return base, []string{"RUNTIME_ROOT=" + filepath.Join(base, "current"), "RUNTIME_SUBDIRECTORY=ratelimit"}
}

// launchEnvoy starts sluice-serve with no arguments and an environment of
// env only (over loopback listeners on free ports, LOG_LEVEL=info, a 20 ms
// poll of the runtime directory).
func launchEnvoy(t *testing.T, env ...string) *proc {
	t.Helper()
	p := &proc{exited: make(chan struct{})}
	p.cmd = exec.Command(binary)
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0",
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=0", "PROMETHEUS_ADDR=127.0.0.1:0", "LOG_LEVEL=info", envoyPollEnv + "=20ms"}, env...)
	p.start(t)
	return p
}

// startEnvoy launches sluice-serve and waits until it listens.
func startEnvoy(t *testing.T, env ...string) *envoyProc {
	t.Helper()
	p := launchEnvoy(t, env...)
	var m []string
	require.Eventually(t, func() bool {
		m = envoyListening.FindStringSubmatch(p.logs())
		select {
		case <-p.exited:
			t.Fatalf("sluice-serve exited %d before listening:\n%s", p.exitCode, p.logs())
		default:
		}
		return m != nil
	}, 20*time.Second, 10*time.Millisecond, "sluice-serve did not listen within 20 s")
	target := m[1]
	if strings.HasPrefix(target, "/") {
		target = "unix://" + target // GRPC_UDS
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	p.client = rlsv3.NewRateLimitServiceClient(conn)
	return &envoyProc{proc: p, http: "http://" + m[2], debug: "http://" + m[3], prometheus: "http://" + m[4], health: healthpb.NewHealthClient(conn)}
}

// limitOf asks for one hit of user=value and returns the answer's
// current_limit (requests per unit) and code.
func limitOf(t *testing.T, p *envoyProc, value string) (uint32, rlsv3.RateLimitResponse_Code) {
	t.Helper()
	resp, err := ask(p.proc, "user", value)
	require.NoError(t, err)
	return resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit(), resp.GetOverallCode()
}

func httpDo(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestEnvoyModeServes: with no Redis, on the embedded store: /healthcheck,
// /json's codes, gRPC decisions and health, Prometheus at PROMETHEUS_PATH
// (with gostats' runtime stats, ratelimit_go_*, and no Redis pool stats)
// and the debug listener.
func TestEnvoyModeServes(t *testing.T) {
	_, env := runtimeEnv(t, limits(2))
	p := startEnvoy(t, append(env, "USE_STATSD=false", "USE_PROMETHEUS=true", "PROMETHEUS_PATH=/stats/prometheus")...)
	require.Contains(t, p.logs(), "REDIS_URL is not set: on the embedded store")

	code, body := httpDo(t, "GET", p.http+"/healthcheck", "")
	require.Equal(t, 200, code)
	require.Equal(t, "OK", body)

	const req = `{"domain": "edge", "descriptors": [{"entries": [{"key": "user", "value": "u1"}]}]}`
	for i, want := range []int{200, 200, 429} {
		code, body := httpDo(t, "POST", p.http+"/json", req)
		require.Equal(t, want, code, "call %d: %s", i+1, body)
		require.Contains(t, body, `"requestsPerUnit":2`)
	}
	code, body = httpDo(t, "POST", p.http+"/json", `{"domain": "edge", "descriptors": [`)
	require.Equal(t, 400, code)
	require.Equal(t, "Bad Request\n", body)

	limit, overall := limitOf(t, p, "u1")
	require.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, overall, "gRPC and /json count on one counter")
	require.Equal(t, uint32(2), limit)
	for _, service := range []string{"ratelimit", ""} {
		resp, err := p.health.Check(context.Background(), &healthpb.HealthCheckRequest{Service: service})
		require.NoError(t, err)
		require.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus(), "service %q", service)
	}

	code, body = httpDo(t, "GET", p.prometheus+"/stats/prometheus", "")
	require.Equal(t, 200, code)
	require.Contains(t, body, `ratelimit_service_rate_limit_over_limit{domain="edge",key1="user"} 2`)
	require.Contains(t, body, "ratelimit_service_config_load_success 1")
	require.Contains(t, body, "\nratelimit_go_numGoroutine ", "gostats' runtime stats")
	require.NotContains(t, body, "ratelimit_redis_pool_", "no Redis pool on the embedded store")
	code, _ = httpDo(t, "GET", p.prometheus+"/metrics", "")
	require.Equal(t, 404, code, "only PROMETHEUS_PATH")

	code, body = httpDo(t, "GET", p.debug+"/debug/pprof/", "")
	require.Equal(t, 200, code)
	require.Contains(t, body, "goroutine")
}

// TestEnvoyModeRefusesToStart: a refused or malformed variable exits 2
// naming it; a configuration that does not load (a deliberate difference:
// envoyproxy/ratelimit starts healthy and answers every call with gRPC
// Unknown), a missing directory and an unreachable Redis exit 1.
func TestEnvoyModeRefusesToStart(t *testing.T) {
	_, good := runtimeEnv(t, limits(2))
	badBase, bad := runtimeEnv(t, "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: fortnight, requests_per_unit: 2}\n")
	cases := []struct {
		name string
		env  []string
		code int
		want string
	}{
		{"memcache", append(good, "BACKEND_TYPE=memcache"), 2, `BACKEND_TYPE="memcache": the memcache backend is not supported`},
		{"statsd", append(good, "USE_STATSD=true"), 2, `USE_STATSD="true": statsd is not supported`},
		{"xDS", append(good, "CONFIG_TYPE=GRPC_XDS_SOTW"), 2, `CONFIG_TYPE="GRPC_XDS_SOTW"`},
		{"a malformed port", append(good, "PORT=http"), 2, `PORT="http": not a port number`},
		{"a bad configuration", bad, 1, filepath.Join(badBase, "current", "ratelimit", "config", "limits.yaml")},
		{"no directory", append(good, "RUNTIME_SUBDIRECTORY=nothere"), 1, "the configuration directory"},
		{"no Redis", append(good, "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=127.0.0.1:1"), 1, "REDIS_URL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := launchEnvoy(t, c.env...)
			require.Equal(t, c.code, p.wait(t), p.logs())
			require.Contains(t, p.logs(), c.want)
			require.NotContains(t, p.logs(), "listening")
		})
	}
}

func reloadedOn(p *envoyProc, on string) func() bool {
	return func() bool { return reloadsOn(p, on) > 0 }
}

// reloadsOn counts p's log lines that say it reloaded on on (a quoted
// cause, or SIGHUP).
func reloadsOn(p *envoyProc, on string) (n int) {
	for _, line := range strings.Split(p.logs(), "\n") {
		if strings.Contains(line, `msg="sluice-serve: reloaded"`) && strings.Contains(line, "on="+on) {
			n++
		}
	}
	return n
}

// TestEnvoyModeReloadsOnARootSwap: under RUNTIME_WATCH_ROOT (the default),
// a swap of the RUNTIME_ROOT symlink reloads; an in-place edit waits for a
// swap or SIGHUP (envoyproxy/ratelimit exits on SIGHUP: a deliberate
// difference); a swap to a set that does not load keeps the one in force.
func TestEnvoyModeReloadsOnARootSwap(t *testing.T) {
	base, env := runtimeEnv(t, limits(2))
	p := startEnvoy(t, env...)
	limit, _ := limitOf(t, p, "u1")
	require.Equal(t, uint32(2), limit)

	writeFile(t, filepath.Join(base, "v1", "ratelimit", "config", "limits.yaml"), limits(5))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, reloadedOn(p, "SIGHUP"), 20*time.Second, 10*time.Millisecond, p.logs())
	require.NotContains(t, p.logs(), `on="runtime change"`, "an in-place edit reloaded")
	limit, _ = limitOf(t, p, "u1")
	require.Equal(t, uint32(5), limit)

	swapRoot(t, filepath.Join(base, "current"), runtimeVersion(t, base, "v2", limits(10)))
	require.Eventually(t, reloadedOn(p, `"runtime change"`), 20*time.Second, 10*time.Millisecond, p.logs())
	limit, _ = limitOf(t, p, "u1")
	require.Equal(t, uint32(10), limit)

	swapRoot(t, filepath.Join(base, "current"), runtimeVersion(t, base, "v3", "domain: edge\nunknown_key: 1\n"))
	require.Eventually(t, func() bool { return strings.Contains(p.logs(), "the previous one stays in force") }, 20*time.Second, 10*time.Millisecond, p.logs())
	limit, _ = limitOf(t, p, "u1")
	require.Equal(t, uint32(10), limit, "the set in force is kept")
}

// TestEnvoyModeReloadsOnADirectoryWrite: with RUNTIME_WATCH_ROOT=false a
// file written, created or removed in the directory reloads.
func TestEnvoyModeReloadsOnADirectoryWrite(t *testing.T) {
	base, env := runtimeEnv(t, limits(2))
	p := startEnvoy(t, append(env, "RUNTIME_WATCH_ROOT=false")...)
	dir := filepath.Join(base, "current", "ratelimit", "config")
	reloads := func() int { return strings.Count(p.logs(), `msg="sluice-serve: reloaded"`) }

	writeFile(t, filepath.Join(dir, "limits.yaml"), limits(7))
	require.Eventually(t, func() bool { return reloads() >= 1 }, 20*time.Second, 10*time.Millisecond, p.logs())
	require.Eventually(t, func() bool { l, _ := limitOf(t, p, "u1"); return l == 7 }, 20*time.Second, 10*time.Millisecond, p.logs())

	other := filepath.Join(dir, "other.yaml")
	writeFile(t, other, "domain: other\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	n := reloads()
	require.Eventually(t, func() bool { return reloads() > n }, 20*time.Second, 10*time.Millisecond, p.logs())
	require.NoError(t, os.Remove(other))
	n = reloads()
	require.Eventually(t, func() bool { return reloads() > n }, 20*time.Second, 10*time.Millisecond, p.logs())

	writeFile(t, filepath.Join(dir, "limits.yaml"), "domain: [\n")
	require.Eventually(t, func() bool { return strings.Contains(p.logs(), "the previous one stays in force") }, 20*time.Second, 10*time.Millisecond, p.logs())
	limit, _ := limitOf(t, p, "u1")
	require.Equal(t, uint32(7), limit, "the set in force is kept")
}

// TestEnvoyModeDrainsOnSIGTERM: a /json call in flight when SIGTERM comes
// is answered, then the process exits 0; a SIGTERM or SIGINT sent during
// the drain is logged and changes nothing.
func TestEnvoyModeDrainsOnSIGTERM(t *testing.T) {
	_, env := runtimeEnv(t, limits(2))
	p := startEnvoy(t, env...)
	body, w := io.Pipe()
	req, err := http.NewRequest("POST", p.http+"/json", body)
	require.NoError(t, err)
	// With Expect: 100-continue the client sends the body only once the
	// handler reads it, so a first write returning means the call is in
	// the handler.
	req.Header.Set("Expect", "100-continue")
	transport := &http.Transport{ExpectContinueTimeout: time.Minute}
	defer transport.CloseIdleConnections()
	answered := make(chan int, 1)
	go func() {
		resp, err := transport.RoundTrip(req)
		if err != nil {
			answered <- -1
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		answered <- resp.StatusCode
	}()
	_, err = w.Write([]byte(`{"domain": "edge", `))
	require.NoError(t, err)

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Eventually(t, func() bool { return strings.Contains(p.logs(), "draining the calls in flight") }, 20*time.Second, 10*time.Millisecond)
	// Signals sent again do not cut the drain (the kernel sends SIGTERM
	// once per thread of a parent that dies).
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
	require.Eventually(t, func() bool { return strings.Contains(p.logs(), "signal=interrupt") }, 20*time.Second, 10*time.Millisecond)
	_, err = w.Write([]byte(`"descriptors": [{"entries": [{"key": "user", "value": "u1"}]}]}`))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.Equal(t, 200, <-answered, p.logs())
	require.Equal(t, 0, p.wait(t), p.logs())
	require.Contains(t, p.logs(), "sluice-serve: stopped")
}

// TestEnvoyModeGRPCOnAUnixSocket: GRPC_UDS replaces GRPC_HOST:GRPC_PORT.
func TestEnvoyModeGRPCOnAUnixSocket(t *testing.T) {
	_, env := runtimeEnv(t, limits(2))
	socket := filepath.Join(t.TempDir(), "rl.sock")
	p := startEnvoy(t, append(env, "GRPC_UDS="+socket)...)
	require.Contains(t, p.logs(), "grpc="+socket)
	limit, code := limitOf(t, p, "u1")
	require.Equal(t, uint32(2), limit)
	require.Equal(t, rlsv3.RateLimitResponse_OK, code)
}

// TestEnvoyModeHealthyWithAtLeastOneConfigLoaded: with
// HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED, an empty directory serves
// unhealthy until a file with a domain loads.
func TestEnvoyModeHealthyWithAtLeastOneConfigLoaded(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "ratelimit", "config")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	p := startEnvoy(t, "RUNTIME_ROOT="+base, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false", "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED=true")
	code, _ := httpDo(t, "GET", p.http+"/healthcheck", "")
	require.Equal(t, 500, code, "no domain loaded")
	writeFile(t, filepath.Join(dir, "limits.yaml"), limits(2))
	require.Eventually(t, func() bool { code, _ := httpDo(t, "GET", p.http+"/healthcheck", ""); return code == 200 }, 20*time.Second, 10*time.Millisecond, p.logs())
}

// TestEnvoyModeLogs: LOG_FORMAT=json writes JSON lines, LOG_LEVEL=warn
// (the default) leaves out the info ones.
func TestEnvoyModeLogs(t *testing.T) {
	_, env := runtimeEnv(t, limits(2))
	p := launchEnvoy(t, append(env, "LOG_FORMAT=json", "LOG_LEVEL=warn")...)
	require.Eventually(t, func() bool { return strings.Contains(p.logs(), `"msg":"sluice-serve: listening"`) }, 20*time.Second, 10*time.Millisecond, p.logs())
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, p.wait(t), p.logs())
	for _, line := range strings.Split(strings.TrimSpace(p.logs()), "\n") {
		require.True(t, strings.HasPrefix(line, "{"), "not a JSON line: %s", line)
		require.NotContains(t, line, `"level":"INFO"`)
	}
}
