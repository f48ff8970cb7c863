package envoyrl

// This file runs go: it is for tests and developer scripts, never for a
// command a user installs (the benchmark calls Find).

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

var (
	once sync.Once
	path string
	err  error
)

// Binary returns the path of envoyproxy/ratelimit's service command,
// Path(os.UserCacheDir()), running go install of Module at Version into it
// the first time (about 100 s with an empty build cache; it needs the
// module proxy), and saying so on log (nil: nothing). Later calls in the
// process return the first answer.
func Binary(log io.Writer) (string, error) {
	once.Do(func() {
		cache, cerr := os.UserCacheDir()
		if cerr != nil {
			err = fmt.Errorf("no user cache directory: %w", cerr)
			return
		}
		path, err = Install(cache, log)
	})
	return path, err
}

// Install returns Path(cache), installing it when it is not there; Binary
// calls it with the user cache directory. The binary is installed into a
// directory of this call's own and renamed into place, so that a
// concurrent install, or one killed half-way, never leaves a partial
// binary at the path.
func Install(cache string, log io.Writer) (string, error) {
	bin := Path(cache)
	if IsExecutable(bin) {
		return bin, nil
	}
	dir := filepath.Dir(bin)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	gobin, err := os.MkdirTemp(dir, "install-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(gobin)
	start := time.Now()
	cmd := exec.Command("go", "install", Module+"@"+Version)
	cmd.Dir = gobin // outside any module or workspace
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s@%s: %w: %s", Module, Version, err, lastLines(string(out), 5))
	}
	if err := os.Rename(filepath.Join(gobin, "service_cmd"), bin); err != nil {
		return "", err
	}
	if log != nil {
		fmt.Fprintf(log, "installed envoyproxy/ratelimit %s into %s in %s\n", Version, dir, time.Since(start).Round(time.Second))
	}
	return bin, nil
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
