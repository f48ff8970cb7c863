package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// admitted asks for value n times and returns the overall codes, and the
// current_limit of the last answer.
func admitted(t *testing.T, p *envoyProc, value string, n int) (string, uint32) {
	t.Helper()
	var codes []string
	var limit uint32
	for range n {
		resp, err := ask(p.proc, "user", value)
		require.NoError(t, err)
		codes = append(codes, resp.GetOverallCode().String())
		limit = resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit()
	}
	return strings.Join(codes, ","), limit
}

// TestEnvoyModeOverlay: SLUICE_OVERLAY names an overlay file that decides
// a rule of the unchanged envoyproxy/ratelimit YAML by another algorithm
// (here a token bucket of burst 3 for a rule of 2 an hour; current_limit
// stays as configured); a change of the overlay's content reloads; an
// overlay that does not parse is refused and the one in force kept.
func TestEnvoyModeOverlay(t *testing.T) {
	_, env := runtimeEnv(t, limits(2))
	overlay := filepath.Join(t.TempDir(), "overlay.yaml")
	writeFile(t, overlay, "rules:\n  edge.user:\n    algorithm: tokenbucket\n    burst: 3\n")
	p := startEnvoy(t, append(env, overlayEnv+"="+overlay)...)

	codes, limit := admitted(t, p, "u1", 4)
	require.Equal(t, "OK,OK,OK,OVER_LIMIT", codes, "a token bucket of burst 3, where the fixed window of 2 would deny the third")
	require.Equal(t, uint32(2), limit, "current_limit as configured")

	n := reloadsOn(p, `"overlay change"`)
	replaceFile(t, overlay, "rules:\n  edge.user:\n    algorithm: gcra\n    burst: 5\n")
	require.Eventually(t, func() bool { return reloadsOn(p, `"overlay change"`) > n }, 20*time.Second, 10*time.Millisecond, p.logs())
	codes, _ = admitted(t, p, "u2", 6)
	require.Equal(t, "OK,OK,OK,OK,OK,OVER_LIMIT", codes, "GCRA of burst 5 after the overlay changed")

	replaceFile(t, overlay, "rules:\n  edge.user:\n    rate: 100\n")
	require.Eventually(t, func() bool { return strings.Contains(p.logs(), "the overlay is refused") }, 20*time.Second, 10*time.Millisecond, p.logs())
	codes, _ = admitted(t, p, "u3", 6)
	require.Equal(t, "OK,OK,OK,OK,OK,OVER_LIMIT", codes, "the overlay in force is kept")

	replaceFile(t, overlay, "rules:\n  edge.nobody:\n    algorithm: gcra\n")
	require.Eventually(t, func() bool {
		return strings.Contains(p.logs(), `overlay \"edge.nobody\": no rule`)
	}, 20*time.Second, 10*time.Millisecond, p.logs())
	codes, _ = admitted(t, p, "u4", 6)
	require.Equal(t, "OK,OK,OK,OK,OK,OVER_LIMIT", codes, "an overlay naming no rule is refused with the files")
}

// TestEnvoyModeRefusesABadOverlay: an overlay that cannot be read or
// parsed at start stops sluice-serve (exit 1), naming SLUICE_OVERLAY; an
// empty SLUICE_OVERLAY is a usage error (exit 2).
func TestEnvoyModeRefusesABadOverlay(t *testing.T) {
	_, env := runtimeEnv(t, limits(2))
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("rules:\n  edge.user:\n    cost: 2\n"), 0o644))
	for _, c := range []struct {
		name, value string
		code        int
		want        string
	}{
		{"missing", filepath.Join(t.TempDir(), "none.yaml"), 1, "SLUICE_OVERLAY: open"},
		{"does not parse", bad, 1, `"edge.user": cost:`},
		{"empty", "", 2, "SLUICE_OVERLAY is set and empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := launchEnvoy(t, append(env, overlayEnv+"="+c.value)...)
			select {
			case <-p.exited:
			case <-time.After(20 * time.Second):
				t.Fatalf("sluice-serve did not exit:\n%s", p.logs())
			}
			require.Equal(t, c.code, p.exitCode, p.logs())
			require.Contains(t, p.logs(), c.want)
		})
	}
}

// TestEnvoyModeKeepsTheOverlayWhenItsFileGoes: an overlay file deleted
// after the start does not block the configuration's reloads: the overlay
// in force is kept and taken with each new set (logged once per reload,
// the deletion's own included), until the file is back, when its content
// reloads.
func TestEnvoyModeKeepsTheOverlayWhenItsFileGoes(t *testing.T) {
	base, env := runtimeEnv(t, limits(2))
	overlay := filepath.Join(t.TempDir(), "overlay.yaml")
	writeFile(t, overlay, "rules:\n  edge.user:\n    algorithm: tokenbucket\n    burst: 3\n")
	p := startEnvoy(t, append(env, overlayEnv+"="+overlay)...)
	const kept = "the overlay file cannot be read; the overlay in force is kept"

	require.NoError(t, os.Remove(overlay))
	require.Eventually(t, func() bool { return strings.Count(p.logs(), kept) == 1 }, 20*time.Second, 10*time.Millisecond, p.logs())

	swapRoot(t, filepath.Join(base, "current"), runtimeVersion(t, base, "v2", limits(5)))
	require.Eventually(t, reloadedOn(p, `"runtime change"`), 20*time.Second, 10*time.Millisecond, p.logs())
	codes, limit := admitted(t, p, "u1", 4)
	require.Equal(t, "OK,OK,OK,OVER_LIMIT", codes, "the token bucket of burst 3 kept, where the new fixed window of 5 would admit 4")
	require.Equal(t, uint32(5), limit, "the new configuration loaded")

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, reloadedOn(p, "SIGHUP"), 20*time.Second, 10*time.Millisecond, p.logs())
	require.Eventually(t, func() bool { return strings.Count(p.logs(), kept) == 3 }, 20*time.Second, 10*time.Millisecond, p.logs())
	require.NotContains(t, p.logs(), "the overlay is refused")

	n := reloadsOn(p, `"overlay change"`) // the deletion's
	replaceFile(t, overlay, "rules:\n  edge.user:\n    algorithm: gcra\n    burst: 7\n")
	require.Eventually(t, func() bool { return reloadsOn(p, `"overlay change"`) > n }, 20*time.Second, 10*time.Millisecond, p.logs())
	codes, _ = admitted(t, p, "u2", 8)
	require.Equal(t, "OK,OK,OK,OK,OK,OK,OK,OVER_LIMIT", codes, "GCRA of burst 7 once the file is back, where the fixed window of 5 would deny the sixth")
	require.Equal(t, 3, strings.Count(p.logs(), kept), "one line per reload while the file was missing")
}

// replaceFile writes content to path as a new file renamed over the old,
// so that a watch polling path never reads it half-written.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".new"
	require.NoError(t, os.WriteFile(tmp, []byte(content), 0o644))
	require.NoError(t, os.Rename(tmp, path))
}
