package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
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
	err := run(t.Context(), []string{"--docs", t.TempDir(), "--full", "--json", "x.json"}, &stdout, &stderr)
	require.ErrorContains(t, err, "not the repository's root")
	err = run(t.Context(), []string{"--docs", root, "--full", "--json", filepath.Join(t.TempDir(), "x.json")}, &stdout, &stderr)
	require.ErrorContains(t, err, "is not inside")
	require.NotContains(t, stderr.String(), "sluice bench on", "nothing ran")

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
