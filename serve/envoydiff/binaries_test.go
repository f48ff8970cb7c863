//go:build unix

package envoydiff_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/envoyrl"
	"github.com/sluicehq/sluice/sluicetest/redistest"
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
	theirPath, theirErr := envoyrl.Binary(os.Stderr)
	if theirErr != nil {
		if os.Getenv(redistest.RequireRedisEnv) == "1" {
			t.Fatalf("envoyproxy/ratelimit could not be installed and %s=1: %v", redistest.RequireRedisEnv, theirErr)
		}
		t.Skipf("envoyproxy/ratelimit could not be installed (set %s=1 to fail instead): %v", redistest.RequireRedisEnv, theirErr)
	}
	return theirPath
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
