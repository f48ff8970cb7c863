package harness

// This file finds the two binaries of the serve scenarios' process
// subjects: envoyproxy/ratelimit, installed as a Go module into the cache
// directory serve/envoydiff installs it into (so that both share one
// binary), and sluice-serve: beside sluice-bench, else built from the
// workspace the benchmark runs in, else on the PATH.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/internal/envoyrl"
)

// sluiceServePackage is the command built from the workspace.
const sluiceServePackage = "github.com/sluicehq/sluice/serve/cmd/sluice-serve"

var (
	sluiceServeOnce sync.Once
	sluiceServePath string
	sluiceServeErr  error
)

// envoyProxyBinary returns envoyproxy/ratelimit's service command,
// installed on first use into the cache directory serve/envoydiff shares
// (package envoyrl).
func envoyProxyBinary() (string, error) { return envoyrl.Binary(nil) }

// sluiceServeBinary returns the sluice-serve the serve scenarios run, found
// once per process (see findSluiceServe).
func sluiceServeBinary() (string, error) {
	sluiceServeOnce.Do(func() {
		cache, err := os.UserCacheDir()
		if err != nil {
			sluiceServeErr = fmt.Errorf("no user cache directory: %w", err)
			return
		}
		self, _ := os.Executable()
		sluiceServePath, sluiceServeErr = findSluiceServe(cache, self)
	})
	return sluiceServePath, sluiceServeErr
}

// findSluiceServe returns the sluice-serve beside self, the running
// executable (an installed sluice-bench, as sluice finds it); else, when
// the benchmark runs inside a Go workspace (the repository's checkout:
// `go run ./bench/cmd/sluice-bench`, or its tests), sluice-serve built
// there with go build into cache/sluice/bench/, so that the scenarios
// measure the checkout's server; else the one on the PATH.
func findSluiceServe(cache, self string) (string, error) {
	if self != "" {
		beside := filepath.Join(filepath.Dir(self), "sluice-serve")
		if fi, err := os.Stat(beside); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return beside, nil
		}
	}
	var whyNotBuilt string
	out, err := exec.Command("go", "env", "GOWORK").Output()
	switch work := strings.TrimSpace(string(out)); {
	case err != nil:
		whyNotBuilt = fmt.Sprintf("go env GOWORK: %v", err)
	case work == "" || work == "off":
		whyNotBuilt = "not inside a Go workspace (the repository's checkout)"
	default:
		bin, err := buildSluiceServe(filepath.Join(cache, "sluice", "bench"))
		if err == nil {
			return bin, nil
		}
		whyNotBuilt = err.Error()
	}
	if path, err := exec.LookPath("sluice-serve"); err == nil {
		return filepath.Abs(path)
	}
	return "", fmt.Errorf("sluice-serve was not built (%s) and is neither beside sluice-bench nor on the PATH: go install %s", whyNotBuilt, sluiceServePackage)
}

// buildSluiceServe runs go build of sluice-serve in the current directory's
// workspace into dir/sluice-serve (written whole, by a rename).
func buildSluiceServe(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	built := filepath.Join(tmp, "sluice-serve")
	if out, err := exec.Command("go", "build", "-o", built, sluiceServePackage).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w: %s", sluiceServePackage, err, lastLines(string(out), 5))
	}
	bin := filepath.Join(dir, "sluice-serve")
	if err := os.Rename(built, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// lastLines returns the last n non-empty lines of s, joined by " | ".
func lastLines(s string, n int) string {
	var lines []string
	for line := range strings.SplitSeq(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			lines = append(lines, line)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 0 {
		return "no output"
	}
	return strings.Join(lines, " | ")
}

// errNoRedisServer is why the process subjects do not run on the embedded
// store.
var errNoRedisServer = errors.New("skipped: needs a real redis-server (--redis auto or --redis URL), " +
	"which the service process connects to; the embedded store serves this benchmark only")
