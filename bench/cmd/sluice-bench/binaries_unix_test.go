//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/bench/harness"
	"github.com/sluicehq/sluice/internal/envoyrl"
)

// serveErrors runs the first serve scenario's two process subjects on a
// redis-server of sluice-bench's own (--redis auto) with args added, and
// returns each subject's error from the --json report.
func serveErrors(t *testing.T, args ...string) map[string]string {
	t.Helper()
	report := filepath.Join(t.TempDir(), "run.json")
	args = append([]string{"--redis", "auto", "--scenarios", "serve: one caller", "--subjects", "envoyproxy/ratelimit",
		"--duration", "500ms", "--rounds", "1", "--json", report}, args...)
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(t.Context(), args, &stdout, &stderr), stderr.String())
	data, err := os.ReadFile(report)
	require.NoError(t, err)
	var r harness.Report
	require.NoError(t, json.Unmarshal(data, &r))
	errs := map[string]string{}
	for _, res := range r.Results {
		errs[res.Subject] = res.Error
	}
	require.Len(t, errs, 2, "the two process subjects ran")
	return errs
}

// TestServeScenariosNeverRunGo: sluice-bench finds the binaries of the
// serve scenarios' process subjects without ever running go, in any
// directory and in the repository's checkout alike (a go first on PATH
// logs every call). With neither installed, each of the two subjects
// fails saying how to install its binary, and --docs refuses to run;
// --sluice-serve and --envoyproxy-ratelimit name the binaries it then
// starts.
func TestServeScenariosNeverRunGo(t *testing.T) {
	redisServer, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("SLUICE_REQUIRE_REDIS") == "1" {
			t.Fatal("redis-server is not on the PATH and SLUICE_REQUIRE_REDIS=1")
		}
		t.Skip("redis-server is not on the PATH")
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	bin := t.TempDir()
	calls := filepath.Join(t.TempDir(), "go-calls")
	require.NoError(t, os.WriteFile(filepath.Join(bin, "go"), []byte("#!/bin/sh\necho \"go $*\" >>"+calls+"\nexit 1\n"), 0o755))
	require.NoError(t, os.Symlink(redisServer, filepath.Join(bin, "redis-server")))
	t.Setenv("PATH", bin)
	// A user cache without envoyproxy/ratelimit installed in it.
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	noGo := func(t *testing.T) {
		t.Helper()
		ran, _ := os.ReadFile(calls)
		require.Empty(t, string(ran), "sluice-bench ran go")
	}

	for name, dir := range map[string]string{"elsewhere": t.TempDir(), "in the checkout": root} {
		t.Run(name, func(t *testing.T) {
			t.Chdir(dir)
			errs := serveErrors(t)
			noGo(t)
			require.Contains(t, errs[harness.ServeEnvoyCompat], "skipped: sluice-serve was not found")
			require.Contains(t, errs[harness.ServeEnvoyCompat], "go install github.com/sluicehq/sluice/serve/cmd/sluice-serve@latest")
			require.Contains(t, errs[harness.ServeEnvoyProxy], "skipped: envoyproxy/ratelimit was not found")
			require.Contains(t, errs[harness.ServeEnvoyProxy], "go install "+envoyrl.Module+"@"+envoyrl.Version)
		})
	}

	// --docs, whose serve block quotes both, refuses to start without
	// them.
	docs := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(docs, "README.md"), []byte("<!-- sluice bench: headline -->\n<!-- end sluice bench -->\n"), 0o644))
	var stdout, stderr bytes.Buffer
	err = run(t.Context(), []string{"--docs", docs, "--full", "--json", filepath.Join(docs, "run.json"), "--redis", "auto"}, &stdout, &stderr)
	require.ErrorContains(t, err, "--docs: the serve scenarios' processes: sluice-serve was not found")
	require.ErrorContains(t, err, "envoyproxy/ratelimit was not found")
	require.ErrorContains(t, err, "bench/run.sh")
	require.NotContains(t, stderr.String(), "sluice bench on", "nothing ran")
	noGo(t)

	// Binaries named by the flags are the ones started: each of these
	// exits at once, saying which it is.
	fakes := t.TempDir()
	for _, name := range []string{"sluice-serve", "service_cmd"} {
		script := "#!/bin/sh\necho 'the fake " + name + ", for the test' >&2\nexit 3\n"
		require.NoError(t, os.WriteFile(filepath.Join(fakes, name), []byte(script), 0o755))
	}
	t.Chdir(root)
	errs := serveErrors(t, "--sluice-serve", filepath.Join(fakes, "sluice-serve"), "--envoyproxy-ratelimit", filepath.Join(fakes, "service_cmd"))
	noGo(t)
	require.Contains(t, errs[harness.ServeEnvoyCompat], "the fake sluice-serve, for the test")
	require.Contains(t, errs[harness.ServeEnvoyProxy], "the fake service_cmd, for the test")
	for _, e := range errs {
		require.True(t, strings.Contains(e, "exited before it was healthy"), e)
	}
}
