package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
)

// askDomain asks for one hit of user=value in domain and returns the
// overall code.
func askDomain(t *testing.T, p *envoyProc, domain, value string) rlsv3.RateLimitResponse_Code {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := p.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: desc("user", value)})
	require.NoError(t, err)
	return resp.GetOverallCode()
}

// TestEnvoyModeLoadsTheSiblingFiles: with RUNTIME_WATCH_ROOT=true
// envoyproxy/ratelimit loads every goruntime key that starts with
// "config.", so RUNTIME_SUBDIRECTORY/config.extra.yaml beside the app
// directory too; sluice-serve loads the same set, and says so.
func TestEnvoyModeLoadsTheSiblingFiles(t *testing.T) {
	base, env := runtimeEnv(t, limits(2))
	writeFile(t, filepath.Join(base, "v1", "ratelimit", "config.extra.yaml"),
		"domain: extra\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 1}\n")
	writeFile(t, filepath.Join(base, "v1", "ratelimit", "configx.yaml"), "not: a configuration of this app\n")
	p := startEnvoy(t, env...)
	require.Contains(t, p.logs(), "loading files beside the configuration directory")
	require.Equal(t, rlsv3.RateLimitResponse_OK, askDomain(t, p, "extra", "u1"))
	require.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, askDomain(t, p, "extra", "u1"), "config.extra.yaml's 1 an hour")
	limit, _ := limitOf(t, p, "u1")
	require.Equal(t, uint32(2), limit, "the app directory's file")
}

// TestEnvoyModeWithoutASubdirectory: RUNTIME_SUBDIRECTORY unset makes
// envoyproxy/ratelimit's goruntime loader a nil one: it loads nothing and
// allows every request. sluice-serve loads RUNTIME_ROOT/
// RUNTIME_APPDIRECTORY and logs that theirs would load nothing (a
// deliberate difference).
func TestEnvoyModeWithoutASubdirectory(t *testing.T) {
	base := t.TempDir()
	writeFile(t, filepath.Join(base, "config", "limits.yaml"), limits(2))
	p := startEnvoy(t, "RUNTIME_ROOT="+base)
	require.Contains(t, p.logs(), "envoyproxy/ratelimit would load none of the configuration directory's files here")
	require.Contains(t, p.logs(), "RUNTIME_SUBDIRECTORY is empty")
	codes, limit := admitted(t, p, "u1", 3)
	require.Equal(t, "OK,OK,OVER_LIMIT", codes)
	require.Equal(t, uint32(2), limit)
}

// TestEnvoyModeFollowsALinkedConfigDirectory: a configuration directory
// that is a symbolic link to a directory: goruntime's walk does not
// follow it (it fails to read it as a file), so envoyproxy/ratelimit
// loads none of its files; sluice-serve loads them, and says so.
func TestEnvoyModeFollowsALinkedConfigDirectory(t *testing.T) {
	base := t.TempDir()
	writeFile(t, filepath.Join(base, "mounted", "limits.yaml"), limits(2))
	require.NoError(t, os.MkdirAll(filepath.Join(base, "root", "ratelimit"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(base, "mounted"), filepath.Join(base, "root", "ratelimit", "config")))
	for _, watchRoot := range []string{"true", "false"} {
		p := startEnvoy(t, "RUNTIME_ROOT="+filepath.Join(base, "root"), "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT="+watchRoot)
		require.Contains(t, p.logs(), "is a symbolic link", "RUNTIME_WATCH_ROOT=%s", watchRoot)
		codes, _ := admitted(t, p, "u1", 3)
		require.Equal(t, "OK,OK,OVER_LIMIT", codes, "RUNTIME_WATCH_ROOT=%s", watchRoot)
		require.NoError(t, p.cmd.Process.Kill())
		<-p.exited
	}
}

// TestEnvoyModeKeepsTheSetWhenItsDirectoryGoes: RUNTIME_ROOT swapped to
// a tree without the configuration directory: envoyproxy/ratelimit loads
// an empty configuration (goruntime logs the walk's error) and allows
// every request; sluice-serve keeps the set in force and logs why.
func TestEnvoyModeKeepsTheSetWhenItsDirectoryGoes(t *testing.T) {
	base, env := runtimeEnv(t, limits(2))
	p := startEnvoy(t, env...)
	writeFile(t, filepath.Join(base, "v2", "ratelimit", "README"), "no config here\n")
	swapRoot(t, filepath.Join(base, "current"), filepath.Join(base, "v2"))
	require.Eventually(t, func() bool {
		return strings.Contains(p.logs(), "the configuration directory cannot be read; the configuration in force is kept")
	}, 20*time.Second, 10*time.Millisecond, p.logs())
	codes, _ := admitted(t, p, "u1", 3)
	require.Equal(t, "OK,OK,OVER_LIMIT", codes, "the set in force")
	_, err := os.Stat(filepath.Join(base, "current", "ratelimit", "config"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
