package serve_test

import (
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/sluicetest/redistest"
)

// TestKilledSluiceStopsItsServer: sluice killed outright (SIGKILL, which
// it cannot pass on) leaves no server behind on Linux: the kernel sends
// the sluice-serve it started SIGTERM, which drains and stops, and the
// process is gone. Before, it kept serving its ports in a process group
// of its own.
func TestKilledSluiceStopsItsServer(t *testing.T) {
	redistest.RequireRedisServer(t)
	dir := t.TempDir()
	for pkg, name := range map[string]string{"./cmd/sluice-serve": "sluice-serve", "github.com/sluicehq/sluice/cmd/sluice": "sluice"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg).CombinedOutput()
		require.NoError(t, err, "go build %s:\n%s", pkg, out)
	}
	server := redistest.StartRedis(t)
	t.Chdir(t.TempDir())
	p := startServeAs(t, []string{filepath.Join(dir, "sluice"), "serve"},
		"domain: edge\npolicies:\n  - {name: p, match: [{key: user}], rate: 5, period: 1h}\n", server.URL())
	require.NotEmpty(t, p.children, "sluice's sluice-serve, as /proc lists it")
	resp, err := p.decide(descriptor("user", "killed"))
	require.NoError(t, err)
	require.Equal(t, ok, resp.GetOverallCode())

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	p.waitLog(t, "shutting down: draining the calls in flight")
	p.waitLog(t, "sluice serve: stopped")
	for _, pid := range p.children {
		require.Eventually(t, func() bool { return syscall.Kill(pid, 0) == syscall.ESRCH }, 20*time.Second, 20*time.Millisecond,
			"sluice-serve %d still runs after sluice was killed", pid)
	}
}
