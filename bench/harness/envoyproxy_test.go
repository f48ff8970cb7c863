//go:build unix

package harness

import (
	"context"
	"fmt"
	"net"
	"os"
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

// requireBinaries installs envoyproxy/ratelimit (or finds it in the cache)
// and builds sluice-serve; an install that fails skips the test, saying
// why, or fails it under SLUICE_REQUIRE_REDIS=1, where no test may skip.
func requireBinaries(t *testing.T) {
	t.Helper()
	if _, err := envoyProxyBinary(); err != nil {
		if os.Getenv(redistest.RequireRedisEnv) == "1" {
			t.Fatalf("envoyproxy/ratelimit could not be installed and %s=1: %v", redistest.RequireRedisEnv, err)
		}
		t.Skipf("envoyproxy/ratelimit could not be installed (set %s=1 to fail instead): %v", redistest.RequireRedisEnv, err)
	}
	_, err := sluiceServeBinary()
	require.NoError(t, err, "sluice-serve is built from this workspace")
}

// TestServeProcessSubjectsDecideAndStop starts each process subject on a
// redis-server of its own with a limit of 3 per HOUR: the process is
// running while it serves, answers over gRPC (three allowed, the fourth
// denied), counts in that redis-server, and is gone, by its pid, once
// stopped.
func TestServeProcessSubjectsDecideAndStop(t *testing.T) {
	requireBinaries(t)
	for _, b := range []rlsBinary{envoyProxyService, sluiceServeService} {
		t.Run(b.what, func(t *testing.T) {
			c, _ := realRedisClients(t)
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
	requireBinaries(t)
	c, stats := realRedisClients(t)
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
	missing := rlsBinary{what: "envoyproxy/ratelimit", find: func() (string, error) { return "", fmt.Errorf("go install: no network") }}
	_, _, err = startRLSSubject(c, limit, missing)
	require.EqualError(t, err, "skipped: envoyproxy/ratelimit could not be found or built: go install: no network")

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
	exits := rlsBinary{what: "a service", find: func() (string, error) { return script, nil }}
	_, _, err = startRLSSubject(c, limit, exits)
	require.ErrorContains(t, err, "exited before it was healthy")
	require.ErrorContains(t, err, "cannot start, for the test")
	require.Empty(t, runningServices())
}

// TestBinariesAreFoundOrSayHow: a go install that fails names the module
// and what go printed; sluice-serve is taken from beside sluice-bench, or
// from the PATH when it cannot be built, or its absence is explained.
func TestBinariesAreFoundOrSayHow(t *testing.T) {
	bin := t.TempDir()
	fakeGo := "#!/bin/sh\nif [ \"$1\" = env ]; then echo off; exit 0; fi\necho 'dial tcp: no network, for the test' >&2\nexit 1\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "go"), []byte(fakeGo), 0o755))
	t.Setenv("PATH", bin)

	cache := t.TempDir()
	_, err := envoyrl.Install(cache, nil)
	require.ErrorContains(t, err, "go install "+envoyrl.Module+"@"+envoyrl.Version)
	require.ErrorContains(t, err, "no network, for the test")
	entries, err := os.ReadDir(filepath.Join(cache, "sluice", "envoydiff", envoyrl.Version))
	require.NoError(t, err)
	require.Empty(t, entries, "no partial install left behind")

	installed := filepath.Join(cache, "sluice", "envoydiff", envoyrl.Version, "service_cmd")
	require.NoError(t, os.WriteFile(installed, []byte("#!/bin/sh\n"), 0o755))
	got, err := envoyrl.Install(cache, nil)
	require.NoError(t, err)
	require.Equal(t, installed, got, "an installed binary is reused")

	_, err = findSluiceServe(cache, "")
	require.ErrorContains(t, err, "not inside a Go workspace")
	require.ErrorContains(t, err, "go install "+sluiceServePackage)
	self := filepath.Join(t.TempDir(), "sluice-bench")
	beside := filepath.Join(filepath.Dir(self), "sluice-serve")
	require.NoError(t, os.WriteFile(beside, []byte("#!/bin/sh\n"), 0o755))
	got, err = findSluiceServe(cache, self)
	require.NoError(t, err)
	require.Equal(t, beside, got)

	// In a workspace whose build fails, the one on the PATH; without
	// one, the build's error.
	inWorkspace := "#!/bin/sh\nif [ \"$1\" = env ]; then echo /somewhere/go.work; exit 0; fi\necho 'build failed, for the test' >&2\nexit 1\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "go"), []byte(inWorkspace), 0o755))
	_, err = findSluiceServe(cache, "")
	require.ErrorContains(t, err, "go build "+sluiceServePackage)
	require.ErrorContains(t, err, "build failed, for the test")
	onPath := filepath.Join(bin, "sluice-serve")
	require.NoError(t, os.WriteFile(onPath, []byte("#!/bin/sh\n"), 0o755))
	got, err = findSluiceServe(cache, "")
	require.NoError(t, err)
	require.Equal(t, onPath, got)
}

// fakeRueidis stands for a real server's rueidis client where the test
// never reaches Redis.
type fakeRueidis struct{ rueidis.Client }
