//go:build unix

package envoydiff_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/sluicetest/redistest"
)

// The envoyproxy/ratelimit the test compares with: its service command,
// installed as a Go module at the commit issue 26 names (3fb702589d36).
const (
	theirModule  = "github.com/envoyproxy/ratelimit/src/service_cmd"
	theirVersion = "v1.4.1-0.20260122083618-3fb702589d36"
)

// buildDir holds the binaries this test binary builds; TestMain removes it.
var buildDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "envoydiff-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "envoydiff:", err)
		os.Exit(1)
	}
	buildDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

var (
	theirOnce sync.Once
	theirPath string
	theirErr  error

	ourOnce sync.Once
	ourPath string
	ourErr  error
)

// theirBinary returns envoyproxy/ratelimit's service command, installed
// with go install into os.UserCacheDir()/sluice/envoydiff/<version>/ on
// first use and reused by every later run. An install that fails skips
// the test, saying why, or fails it under SLUICE_REQUIRE_REDIS=1 (as CI
// runs), where no test may skip.
func theirBinary(t *testing.T) string {
	t.Helper()
	theirOnce.Do(func() { theirPath, theirErr = installTheirs() })
	if theirErr != nil {
		if os.Getenv(redistest.RequireRedisEnv) == "1" {
			t.Fatalf("envoyproxy/ratelimit could not be installed and %s=1: %v", redistest.RequireRedisEnv, theirErr)
		}
		t.Skipf("envoyproxy/ratelimit could not be installed (set %s=1 to fail instead): %v", redistest.RequireRedisEnv, theirErr)
	}
	return theirPath
}

func installTheirs() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no user cache directory: %w", err)
	}
	dir := filepath.Join(cache, "sluice", "envoydiff", theirVersion)
	bin := filepath.Join(dir, "service_cmd")
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Install into a directory of this run's own, then rename the binary
	// into place: a concurrent run, or one killed half-way, never leaves a
	// partial binary at bin.
	gobin, err := os.MkdirTemp(dir, "install-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(gobin)
	start := time.Now()
	cmd := exec.Command("go", "install", theirModule+"@"+theirVersion)
	cmd.Dir = gobin // outside any module or workspace
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s@%s: %w\n%s", theirModule, theirVersion, err, out)
	}
	if err := os.Rename(filepath.Join(gobin, "service_cmd"), bin); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "envoydiff: installed envoyproxy/ratelimit %s into %s in %s\n", theirVersion, dir, time.Since(start).Round(time.Second))
	return bin, nil
}

// ourBinaryEnv names a sluice-serve binary to compare instead of the one
// built from this checkout (another revision's, for a bisection).
const ourBinaryEnv = "ENVOYDIFF_SLUICE_SERVE"

// ourBinary returns sluice-serve built from this checkout (the serve
// module, the parent directory), once per test binary, or the binary
// $ENVOYDIFF_SLUICE_SERVE names.
func ourBinary(t *testing.T) string {
	t.Helper()
	ourOnce.Do(func() {
		if bin := os.Getenv(ourBinaryEnv); bin != "" {
			ourPath, ourErr = filepath.Abs(bin)
			return
		}
		bin := filepath.Join(buildDir, "sluice-serve")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/sluice-serve")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			ourErr = fmt.Errorf("go build ./cmd/sluice-serve: %w\n%s", err, out)
			return
		}
		ourPath = bin
	})
	if ourErr != nil {
		t.Fatal(ourErr)
	}
	return ourPath
}
