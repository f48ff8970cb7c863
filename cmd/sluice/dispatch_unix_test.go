//go:build unix

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer that a child's output goroutine may write
// while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fakeServe is a sluice-serve that prints its arguments, says it is ready,
// and on SIGTERM or SIGINT says which it got and exits 0 (or, given
// --exit N, exits N at once).
const fakeServe = `#!/bin/sh
echo "args: $*"
if [ "$1" = "--exit" ]; then exit "$2"; fi
trap 'echo "got TERM"; exit 0' TERM
trap 'echo "got INT"; exit 0' INT
echo ready
while :; do sleep 0.05; done
`

// TestServeRunsTheInstalledCommand: sluice serve runs the sluice-serve
// found on PATH (no go, no checkout), in this directory with the
// arguments as given, passes SIGTERM and SIGINT on to it, and exits with
// its status.
func TestServeRunsTheInstalledCommand(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sluice-serve"), []byte(fakeServe), 0o755))
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))

	for _, c := range []struct {
		sig  os.Signal
		want string
	}{{syscall.SIGTERM, "got TERM"}, {os.Interrupt, "got INT"}} {
		t.Run(c.want, func(t *testing.T) {
			var stdout, stderr syncBuffer
			signals := make(chan os.Signal, 1)
			code := make(chan int, 1)
			go func() {
				code <- runWith(context.Background(), signals, []string{"serve", "--config", "policies.yaml"}, &stdout, &stderr)
			}()
			require.Eventually(t, func() bool { return strings.Contains(stdout.String(), "ready") }, 30*time.Second, 10*time.Millisecond,
				"the installed sluice-serve did not start: %s", stderr.String())
			signals <- c.sig
			select {
			case got := <-code:
				require.Equal(t, 0, got, stderr.String())
			case <-time.After(30 * time.Second):
				t.Fatalf("sluice serve did not return after %v: %s", c.sig, stdout.String())
			}
			require.Contains(t, stdout.String(), "args: --config policies.yaml", "the arguments as given, paths unchanged")
			require.Contains(t, stdout.String(), c.want)
		})
	}

	var stdout, stderr syncBuffer
	require.Equal(t, 3, runWith(context.Background(), nil, []string{"serve", "--exit", "3"}, &stdout, &stderr), "its exit status")
}

// TestServeNotInstalled: with no sluice-serve beside sluice or on PATH,
// sluice serve says how to install it and never calls go, even in a
// checkout (a go on PATH that would run logs its call).
func TestServeNotInstalled(t *testing.T) {
	bin := t.TempDir()
	called := filepath.Join(t.TempDir(), "go-was-called")
	require.NoError(t, os.WriteFile(filepath.Join(bin, "go"), []byte("#!/bin/sh\ntouch "+called+"\n"), 0o755))
	t.Setenv("PATH", bin)
	for _, dir := range []string{t.TempDir(), "../.."} { // elsewhere, and the repository root
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Chdir(dir)
			var stdout, stderr syncBuffer
			require.Equal(t, 1, runWith(context.Background(), nil, []string{"serve", "--config", "p.yaml"}, &stdout, &stderr))
			require.Contains(t, stderr.String(), "sluice-serve is not installed")
			require.Contains(t, stderr.String(), "go install github.com/sluicehq/sluice/serve/cmd/sluice-serve@latest")
			require.NoFileExists(t, called, "sluice serve ran go")
		})
	}
}
