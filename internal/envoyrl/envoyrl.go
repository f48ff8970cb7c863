// Package envoyrl locates envoyproxy/ratelimit, the service sluice-serve
// is a drop-in for: its service command as a Go module at the commit
// sluice-serve is compared with. Find only looks (it never runs go), for
// the benchmark's serve scenarios; Install and Binary (install.go) run go
// install into the user cache, for the differential test
// (serve/envoydiff), the benchmark's tests and bench/run.sh, so that all
// share one binary.
package envoyrl

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Module and Version are the envoyproxy/ratelimit service command that is
// compared with: the commit issue 26 names (3fb702589d36).
const (
	Module  = "github.com/envoyproxy/ratelimit/src/service_cmd"
	Version = "v1.4.1-0.20260122083618-3fb702589d36"
)

// PathNames are the names Find looks for on the PATH: the one go install
// gives the command, and the one envoyproxy/ratelimit's image gives it.
var PathNames = []string{"service_cmd", "ratelimit"}

// Path is where Install puts the service command under cache:
// cache/sluice/envoydiff/<Version>/service_cmd.
func Path(cache string) string {
	return filepath.Join(cache, "sluice", "envoydiff", Version, "service_cmd")
}

// Find returns envoyproxy/ratelimit's service command without running go:
// Path(cache) when it is installed there (cache "" skips it), else the
// first of PathNames on the PATH, made absolute. Its error says where it
// looked and how to install it.
func Find(cache string) (string, error) {
	if cache != "" {
		if bin := Path(cache); IsExecutable(bin) {
			return bin, nil
		}
	}
	for _, name := range PathNames {
		if p, err := exec.LookPath(name); err == nil {
			return filepath.Abs(p)
		}
	}
	where := "neither service_cmd nor ratelimit is on the PATH"
	if cache != "" {
		where = fmt.Sprintf("it is not installed at %s, and %s", Path(cache), where)
	}
	return "", errors.New(where + ": install it with go install " + Module + "@" + Version)
}

// IsExecutable reports whether path is a regular file someone may run.
func IsExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
