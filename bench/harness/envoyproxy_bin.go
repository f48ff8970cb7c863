package harness

// This file finds the two binaries of the serve scenarios' process
// subjects, without ever running go (sluice-bench is a command users
// install, and runs in any directory): each is the one Binaries names
// (sluice-bench's --sluice-serve and --envoyproxy-ratelimit), else
// sluice-serve beside the running executable (an installed sluice-bench,
// as sluice finds it) or on the PATH, and envoyproxy/ratelimit's service
// command where the tests install it (the user cache directory
// serve/envoydiff shares) or on the PATH (envoyrl.Find). A binary that is
// missing fails its subject with how to install it. In the repository's
// checkout, bench/run.sh builds the checkout's sluice-serve and installs
// envoyproxy/ratelimit before it runs the benchmark.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/sluicehq/sluice/internal/envoyrl"
)

// Binaries names the programs the process subjects start; an empty field
// is looked up (Find).
type Binaries struct {
	// SluiceServe is sluice-serve (--sluice-serve).
	SluiceServe string
	// EnvoyProxy is envoyproxy/ratelimit's service command, service_cmd
	// (--envoyproxy-ratelimit).
	EnvoyProxy string
}

// sluiceServePackage is the command sluice-serve is installed from.
const sluiceServePackage = "github.com/sluicehq/sluice/serve/cmd/sluice-serve"

// Find returns b with both binaries as absolute paths: the ones b names,
// else those found as the file's comment says. It never runs go; its
// error says, for each binary it could not find, where it looked and how
// to install it.
func (b Binaries) Find() (Binaries, error) {
	serve, serveErr := b.sluiceServe()
	if serveErr != nil {
		serveErr = fmt.Errorf("sluice-serve was not found: %w", serveErr)
	}
	envoy, envoyErr := b.envoyProxy()
	if envoyErr != nil {
		envoyErr = fmt.Errorf("envoyproxy/ratelimit was not found: %w", envoyErr)
	}
	return Binaries{SluiceServe: serve, EnvoyProxy: envoy}, errors.Join(serveErr, envoyErr)
}

// sluiceServe is b.SluiceServe, else the sluice-serve beside the running
// executable, else the one on the PATH.
func (b Binaries) sluiceServe() (string, error) {
	if b.SluiceServe != "" {
		return named(b.SluiceServe)
	}
	self, _ := os.Executable()
	return findSluiceServe(self)
}

// envoyProxy is b.EnvoyProxy, else envoyrl.Find in the user cache
// directory and on the PATH.
func (b Binaries) envoyProxy() (string, error) {
	if b.EnvoyProxy != "" {
		return named(b.EnvoyProxy)
	}
	cache, _ := os.UserCacheDir() // none: the PATH alone
	bin, err := envoyrl.Find(cache)
	if err != nil {
		return "", fmt.Errorf("%w, or pass --envoyproxy-ratelimit PATH", err)
	}
	return bin, nil
}

// named is a binary named by path: absolute, and an executable file.
func named(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if !envoyrl.IsExecutable(abs) {
		return "", fmt.Errorf("%s is not an executable file", path)
	}
	return abs, nil
}

// findSluiceServe returns the sluice-serve beside self (the running
// executable: an installed pair matches), else the one on the PATH.
func findSluiceServe(self string) (string, error) {
	where := "it is not on the PATH"
	if self != "" {
		dir := filepath.Dir(self)
		if beside := filepath.Join(dir, "sluice-serve"); envoyrl.IsExecutable(beside) {
			return beside, nil
		}
		where = fmt.Sprintf("it is neither beside sluice-bench (in %s) nor on the PATH", dir)
	}
	if path, err := exec.LookPath("sluice-serve"); err == nil {
		return filepath.Abs(path)
	}
	return "", fmt.Errorf("%s: install it with go install %s@latest, or pass --sluice-serve PATH", where, sluiceServePackage)
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
