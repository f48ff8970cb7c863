//go:build unix

package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/envoyrl"
	"github.com/sluicehq/sluice/sluicetest/redistest"
)

// realRedisClients starts a redis-server for t and returns both clients
// on it, as sluice-bench --redis does.
func realRedisClients(t *testing.T) (Clients, *redis.Client) {
	t.Helper()
	srv := redistest.StartRedis(t)
	goRedis := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, PoolSize: 64})
	t.Cleanup(func() { _ = goRedis.Close() })
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	stats := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = stats.Close() })
	return Clients{GoRedis: goRedis, Rueidis: rc}, stats
}

// requireBinaries returns the binaries of the process subjects as this
// checkout has them, as bench/run.sh does: envoyproxy/ratelimit installed
// (or found in the user cache) and sluice-serve built from the workspace
// into a directory of t's. An install that fails skips the test, saying
// why, or fails it under SLUICE_REQUIRE_REDIS=1, where no test may skip.
func requireBinaries(t *testing.T) Binaries {
	t.Helper()
	envoy, err := envoyrl.Binary(nil)
	if err != nil {
		if os.Getenv(redistest.RequireRedisEnv) == "1" {
			t.Fatalf("envoyproxy/ratelimit could not be installed and %s=1: %v", redistest.RequireRedisEnv, err)
		}
		t.Skipf("envoyproxy/ratelimit could not be installed (set %s=1 to fail instead): %v", redistest.RequireRedisEnv, err)
	}
	serve := filepath.Join(t.TempDir(), "sluice-serve")
	out, err := exec.Command("go", "build", "-o", serve, sluiceServePackage).CombinedOutput()
	require.NoError(t, err, "go build %s: %s", sluiceServePackage, out)
	return Binaries{SluiceServe: serve, EnvoyProxy: envoy}
}

// TestServeProcessSubjectsDecideAndStop starts each process subject on a
// redis-server of its own with a limit of 3 per HOUR: the process is
// running while it serves, answers over gRPC (three allowed, the fourth
// denied), counts in that redis-server, and is gone, by its pid, once
// stopped.
func TestServeProcessSubjectsDecideAndStop(t *testing.T) {
	bins := requireBinaries(t)
	for _, b := range []rlsBinary{envoyProxyService, sluiceServeService} {
		t.Run(b.what, func(t *testing.T) {
			c, _ := realRedisClients(t)
			c.Binaries = bins
			ctx := context.Background()
			p, decide, err := startRLSSubject(c, sluice.Limit{Rate: 3, Period: time.Hour, Burst: 3}, b)
			require.NoError(t, err)
			t.Cleanup(p.stop)
			pid := p.cmd.Process.Pid
			require.Contains(t, runningServices(), pid)
			require.NoError(t, syscall.Kill(pid, 0), "the process runs")

			// A second key if the first straddled the top of an hour.
			for attempt := 0; ; attempt++ {
				hour := time.Now().Truncate(time.Hour)
				var got []bool
				for range 4 {
					ok, err := decide(ctx, fmt.Sprintf("u%d", attempt))
					require.NoError(t, err)
					got = append(got, ok)
				}
				if time.Now().Truncate(time.Hour) != hour && attempt == 0 {
					continue
				}
				require.Equal(t, []bool{true, true, true, false}, got)
				break
			}
			keys, err := c.GoRedis.Keys(ctx, "*").Result()
			require.NoError(t, err)
			require.NotEmpty(t, keys, "it counts in the scenario's redis-server")

			p.stop()
			p.stop() // twice is fine
			require.NotContains(t, runningServices(), pid)
			require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "the process is gone")
			_, err = net.DialTimeout("tcp", p.grpcAddr, time.Second)
			require.Error(t, err, "nothing listens on its gRPC port any more")
			_, err = os.Stat(p.dir)
			require.ErrorIs(t, err, os.ErrNotExist, "its runtime directory is removed")
		})
	}
}

// TestServeScenariosRunTheProcesses runs both serve scenarios briefly,
// selecting the two process subjects, on a real redis-server: each
// decides everything it is asked over gRPC, with Redis calls measured,
// and no process is left running afterwards.
func TestServeScenariosRunTheProcesses(t *testing.T) {
	bins := requireBinaries(t)
	c, stats := realRedisClients(t)
	c.Binaries = bins
	o := Options{Duration: 500 * time.Millisecond, Scenarios: ServeScenarios(), Clients: c, Stats: stats, OnlySubjects: "envoyproxy/ratelimit"}
	require.Equal(t, 4, Planned(o), "both process subjects in both scenarios")
	results := Run(context.Background(), o)
	require.Len(t, results, 4)
	var subjects []string
	for _, r := range results {
		subjects = append(subjects, r.Subject)
		require.Empty(t, r.Error, r.Subject)
		require.Positive(t, r.Requests, r.Subject)
		require.Equal(t, r.Requests, r.Admitted, "%s: the limit admits everything", r.Subject)
		require.Positive(t, r.RedisCallsPerDecision, "%s: it calls the scenario's redis-server", r.Subject)
		require.Nil(t, r.Overhead, r.Subject)
	}
	require.Equal(t, []string{ServeEnvoyProxy, ServeEnvoyCompat, ServeEnvoyProxy, ServeEnvoyCompat}, subjects)
	require.Empty(t, runningServices(), "every process is stopped at the end of its run")
}

// TestServeProcessSubjectsSayWhyTheyDoNotRun: on the embedded store, with
// a binary that cannot be had, with a limit no envoyproxy/ratelimit file
// can state, or with a process that exits at start, the subject errs with
// the reason (the report's error column) and leaves nothing running.
func TestServeProcessSubjectsSayWhyTheyDoNotRun(t *testing.T) {
	limit := sluice.Limit{Rate: 5, Period: time.Minute, Burst: 5}
	_, _, err := startRLSSubject(Clients{GoRedis: embeddedClient(t)}, limit, envoyProxyService)
	require.ErrorIs(t, err, errNoRedisServer)

	c := Clients{GoRedis: redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), Rueidis: fakeRueidis{}}
	t.Cleanup(func() { _ = c.GoRedis.Close() })
	missing := rlsBinary{what: "envoyproxy/ratelimit", find: func(Binaries) (string, error) { return "", fmt.Errorf("not on the PATH") }}
	_, _, err = startRLSSubject(c, limit, missing)
	require.EqualError(t, err, "skipped: envoyproxy/ratelimit was not found: not on the PATH")

	for _, bad := range []sluice.Limit{{Rate: 5, Period: 10 * time.Second, Burst: 5}, {Rate: 5, Period: time.Second, Burst: 6}} {
		_, err := envoyYAML(bad)
		require.ErrorContains(t, err, "per second, minute, hour or day with burst = rate", bad.String())
	}
	yaml, err := envoyYAML(limit)
	require.NoError(t, err)
	require.Equal(t, "domain: bench\ndescriptors:\n  - key: user_id\n    rate_limit:\n      unit: MINUTE\n      requests_per_unit: 5\n", yaml)

	dir := t.TempDir()
	script := filepath.Join(dir, "exits")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho 'cannot start, for the test' >&2\nexit 3\n"), 0o755))
	exits := rlsBinary{what: "a service", find: func(Binaries) (string, error) { return script, nil }}
	_, _, err = startRLSSubject(c, limit, exits)
	require.ErrorContains(t, err, "exited before it was healthy")
	require.ErrorContains(t, err, "cannot start, for the test")
	require.Empty(t, runningServices())
}

// TestBinariesAreFoundOrSayHow: the process subjects' binaries are found
// without running go (a go on PATH logs every call): each one named is
// taken as an absolute path, if it is an executable; else sluice-serve
// beside sluice-bench, then on the PATH, and envoyproxy/ratelimit in the
// user cache where the tests install it, then on the PATH as service_cmd or
// ratelimit; what is missing is named with where it was looked for and
// how to install it.
func TestBinariesAreFoundOrSayHow(t *testing.T) {
	bin := t.TempDir()
	calls := filepath.Join(t.TempDir(), "go-calls")
	require.NoError(t, os.WriteFile(filepath.Join(bin, "go"), []byte("#!/bin/sh\necho \"go $*\" >>"+calls+"\nexit 1\n"), 0o755))
	t.Setenv("PATH", bin)
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache) // os.UserCacheDir on Linux
	t.Setenv("HOME", t.TempDir())
	cache, err := os.UserCacheDir()
	require.NoError(t, err)
	executable := func(path string) string {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755))
		return path
	}

	_, err = Binaries{}.Find()
	require.ErrorContains(t, err, "sluice-serve was not found: it is neither beside sluice-bench (in ")
	require.ErrorContains(t, err, "nor on the PATH: install it with go install "+sluiceServePackage+"@latest, or pass --sluice-serve PATH")
	require.ErrorContains(t, err, "envoyproxy/ratelimit was not found: it is not installed at "+envoyrl.Path(cache)+
		", and neither service_cmd nor ratelimit is on the PATH: install it with go install "+envoyrl.Module+"@"+envoyrl.Version+
		", or pass --envoyproxy-ratelimit PATH")

	// On the PATH.
	ratelimit := executable(filepath.Join(bin, "ratelimit"))
	serveOnPath := executable(filepath.Join(bin, "sluice-serve"))
	got, err := Binaries{}.Find()
	require.NoError(t, err)
	require.Equal(t, Binaries{SluiceServe: serveOnPath, EnvoyProxy: ratelimit}, got)
	serviceCmd := executable(filepath.Join(bin, "service_cmd"))
	got, err = Binaries{}.Find()
	require.NoError(t, err)
	require.Equal(t, serviceCmd, got.EnvoyProxy, "service_cmd, the name go install gives it, first")

	// Installed in the cache, and beside sluice-bench: before the PATH.
	installed := executable(envoyrl.Path(cache))
	got, err = Binaries{}.Find()
	require.NoError(t, err)
	require.Equal(t, installed, got.EnvoyProxy)
	self := filepath.Join(t.TempDir(), "sluice-bench")
	beside := executable(filepath.Join(filepath.Dir(self), "sluice-serve"))
	got2, err := findSluiceServe(self)
	require.NoError(t, err)
	require.Equal(t, beside, got2)

	// Named: before everything, made absolute, and refused unless it
	// can run.
	dir := t.TempDir()
	t.Chdir(dir)
	executable(filepath.Join(dir, "my-serve"))
	executable(filepath.Join(dir, "my-envoy"))
	got, err = Binaries{SluiceServe: "my-serve", EnvoyProxy: "./my-envoy"}.Find()
	require.NoError(t, err)
	require.Equal(t, Binaries{SluiceServe: filepath.Join(dir, "my-serve"), EnvoyProxy: filepath.Join(dir, "my-envoy")}, got)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "not-executable"), nil, 0o644))
	_, err = Binaries{SluiceServe: "not-executable", EnvoyProxy: "missing"}.Find()
	require.ErrorContains(t, err, "sluice-serve was not found: not-executable is not an executable file")
	require.ErrorContains(t, err, "envoyproxy/ratelimit was not found: missing is not an executable file")

	ran, _ := os.ReadFile(calls)
	require.Empty(t, string(ran), "finding the binaries ran go")
}

// fakeRueidis stands for a real server's rueidis client where the test
// never reaches Redis.
type fakeRueidis struct{ rueidis.Client }
