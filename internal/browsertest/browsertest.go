//go:build unix

// Package browsertest runs a headless Chromium-family browser for the tests
// that open Sluice's HTML reports (the bench's and sluice replay's): the
// DOM it builds, or a screenshot.
package browsertest

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
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

// Screenshot opens url in browser at a window of width x height and
// returns the picture, failing t if none is taken or it is not that size.
func Screenshot(t testing.TB, browser, url string, width, height int) image.Image {
	t.Helper()
	shot := filepath.Join(t.TempDir(), "page.png")
	_, stderr, err := Run(t, browser, fmt.Sprintf("--window-size=%d,%d", width, height), "--screenshot="+shot, url)
	if err != nil {
		t.Fatalf("%s --screenshot: %v; stderr:\n%s", browser, err, stderr)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v; stderr:\n%s", err, stderr)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	if got := img.Bounds().Size(); got != image.Pt(width, height) {
		t.Fatalf("screenshot of %v, want %dx%d", got, width, height)
	}
	return img
}

// Near reports whether c is within 3 of rgb (0xRRGGBB) in every channel.
func Near(c color.Color, rgb uint32) bool {
	r, g, b, _ := c.RGBA()
	near := func(v uint32, want uint32) bool { d := int(v>>8) - int(want&0xff); return d >= -3 && d <= 3 }
	return near(r, rgb>>16) && near(g, rgb>>8) && near(b, rgb)
}
