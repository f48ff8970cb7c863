//go:build unix && !linux

package serve_test

import "os/exec"

// dieWithTest does nothing where there is no parent-death signal: the
// tests' Cleanup kills the processes they start.
func dieWithTest(*exec.Cmd) {}
