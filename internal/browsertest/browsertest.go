//go:build unix

// Package browsertest runs a headless Chromium-family browser for the tests
// that open Sluice's HTML reports (the bench's and sluice replay's): the
// DOM it builds, or a screenshot.
package browsertest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// Find returns the path of a Chromium-family browser on PATH, or "".
func Find() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	return ""
}

// Require returns the browser, or skips t without one, or fails it when
// SLUICE_REQUIRE_BROWSER=1 (as CI sets it).
func Require(t testing.TB) string {
	t.Helper()
	browser := Find()
	if browser == "" {
		if os.Getenv("SLUICE_REQUIRE_BROWSER") == "1" {
			t.Fatal("SLUICE_REQUIRE_BROWSER=1 but no chromium, chromium-browser or google-chrome on PATH (Debian: apt-get install chromium)")
		}
		t.Skip("no chromium, chromium-browser or google-chrome on PATH; SLUICE_REQUIRE_BROWSER=1 makes this a failure")
	}
	return browser
}

// Run runs browser headless with a fresh profile and args, for at most a
// minute, and returns its standard output and error. It runs in a process
// group of its own, killed when it returns, so that no renderer or crash
// handler outlives the test.
func Run(t testing.TB, browser string, args ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	all := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(),
	}, args...)
	cmd := exec.CommandContext(ctx, browser, all...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A child left holding stdout must not hold up Wait past the timeout.
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever of the group is left
	}
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return out.Bytes(), errOut.Bytes(), err
}
