package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redisproc"
)

func TestHelpExitsZero(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"-h"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "-full")
	require.Contains(t, stderr.String(), "-docs")
}

// TestDocsFlag: --docs is refused before anything runs unless the run
// writes every scenario to a JSON the docs can name; with --from-json it
// rewrites the blocks from the saved run.
func TestDocsFlag(t *testing.T) {
	root := t.TempDir()
	readme := filepath.Join(root, "README.md")
	require.NoError(t, os.WriteFile(readme, []byte("<!-- sluice bench: headline -->\n<!-- end sluice bench -->\n"), 0o644))
	for _, args := range [][]string{
		{"--docs", root},
		{"--docs", root, "--json", filepath.Join(root, "run.json")},
		{"--docs", root, "--full"},
		{"--docs", root, "--full", "--scenarios", "burst", "--json", filepath.Join(root, "run.json")},
	} {
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), args, &stdout, &stderr)
		require.ErrorContains(t, err, "--docs needs --full", args)
		require.NotContains(t, stderr.String(), "sluice bench on", "nothing ran: %v", args)
	}
	var stdout, stderr bytes.Buffer
	for want, args := range map[string][]string{
		"--docs needs --redis auto":            {"--docs", root, "--full", "--json", filepath.Join(root, "x.json"), "--redis", "redis://127.0.0.1:1/0"},
		"and the default --duration":           {"--docs", root, "--full", "--json", filepath.Join(root, "x.json"), "--redis", "auto", "--duration", "1s"},
		"and --rounds (3)":                     {"--docs", root, "--full", "--json", filepath.Join(root, "x.json"), "--redis", "auto", "--rounds", "1"},
		"not the repository's root":            {"--docs", t.TempDir(), "--full", "--json", "x.json", "--redis", "auto"},
		"is not inside":                        {"--docs", root, "--full", "--json", filepath.Join(t.TempDir(), "x.json"), "--redis", "auto"},
		"a round would be under 100ms":         {"--duration", "100ms", "--rounds", "20"},
		"unexpected arguments":                 {"--from-json", "x.json", "extra"},
		"--full would not apply":               {"--from-json", "x.json", "--full"},
		"--rounds 0: must be between 1 and 20": {"--rounds", "0"},
		"missing: not an executable file":      {"--sluice-serve", filepath.Join(t.TempDir(), "missing")},
		"README.md: not an executable file":    {"--envoyproxy-ratelimit", readme},
	} {
		stderr.Reset()
		err := run(t.Context(), args, &stdout, &stderr)
		require.ErrorContains(t, err, want, args)
		require.NotContains(t, stderr.String(), "sluice bench on", "nothing ran: %v", args)
	}
	// A block the docs could not rewrite is found before the run, too.
	bad := filepath.Join(root, "docs")
	require.NoError(t, os.MkdirAll(bad, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bad, "x.md"), []byte("<!-- sluice bench: nonsense -->\n<!-- end sluice bench -->\n"), 0o644))
	err := run(t.Context(), []string{"--docs", root, "--full", "--json", filepath.Join(root, "x.json"), "--redis", "auto"}, &stdout, &stderr)
	require.ErrorContains(t, err, `unknown block "nonsense"`)
	require.NoError(t, os.Remove(filepath.Join(bad, "x.md")))

	saved := filepath.Join(root, "bench", "runs", "full.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(saved), 0o755))
	data, err := os.ReadFile(filepath.Join("..", "..", "runs", "full.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(saved, data, 0o644))
	stdout.Reset()
	require.NoError(t, run(t.Context(), []string{"--from-json", saved, "--docs", root}, &stdout, &stderr))
	require.Contains(t, stdout.String(), "--docs: 1 files rewritten")
	got, err := os.ReadFile(readme)
	require.NoError(t, err)
	require.Contains(t, string(got), "| coalesced vs redis_rate: decisions/s |")
	require.Contains(t, string(got), "From `bench/runs/full.json`")
}

// TestRefusesAServerWithData: the benchmark flushes its server between
// runs, so a --redis URL whose server holds any key is refused before
// anything runs, and the key is still there.
func TestRefusesAServerWithData(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("SLUICE_REQUIRE_REDIS") == "1" {
			t.Fatal("redis-server is not on the PATH and SLUICE_REQUIRE_REDIS=1")
		}
		t.Skip("redis-server is not on the PATH")
	}
	server, err := redisproc.Start()
	require.NoError(t, err)
	t.Cleanup(server.Stop)
	c := redis.NewClient(&redis.Options{Addr: server.Addr})
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.Do(t.Context(), "SELECT", 0).Err())
	require.NoError(t, c.Set(t.Context(), "precious", "1", 0).Err())

	var stdout, stderr bytes.Buffer
	err = run(t.Context(), []string{"--redis", "redis://" + server.Addr + "/3", "--scenarios", "latency", "--duration", "300ms"}, &stdout, &stderr)
	require.ErrorContains(t, err, "the server is not empty (1 keys)")
	require.NotContains(t, stderr.String(), "sluice bench on", "nothing ran")
	require.Equal(t, "1", c.Get(t.Context(), "precious").Val(), "the key survives")
}
