package redisproc_test

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redisproc"
)

func TestStartAnswersAndStopEnds(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("SLUICE_REQUIRE_REDIS") == "1" {
			t.Fatal("redis-server is not on the PATH and SLUICE_REQUIRE_REDIS=1")
		}
		t.Skip("redis-server is not on the PATH")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	s, err := redisproc.Start()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(s.Addr, "127.0.0.1:"), s.Addr)
	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the server's directory")

	c, err := net.Dial("tcp", s.Addr)
	require.NoError(t, err)
	_, err = c.Write([]byte("PING\r\n"))
	require.NoError(t, err)
	line, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "+PONG\r\n", line)
	_ = c.Close()

	s.Stop()
	s.Stop() // twice is fine
	require.Error(t, syscall.Kill(s.Pid, 0), "the process is gone")
	_, err = net.Dial("tcp", s.Addr)
	require.Error(t, err, "nothing listens any more")
	entries, err = os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, entries, "Stop removed the directory")
}

func TestStartWithoutRedisServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := redisproc.Start()
	require.ErrorContains(t, err, "redis-server is not on the PATH")
}

// TestAServerThatExitsAtStart: Start reports what the server printed,
// and leaves no directory behind.
func TestAServerThatExitsAtStart(t *testing.T) {
	bin := t.TempDir()
	script := "#!/bin/sh\necho 'FATAL: cannot start, for the test'\nexit 1\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "redis-server"), []byte(script), 0o755))
	t.Setenv("PATH", bin)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	_, err := redisproc.Start()
	require.ErrorContains(t, err, "redis-server exited at start: FATAL: cannot start, for the test")
	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, entries, "its directory is removed")
}
