//go:build !linux

package harness

import "os/exec"

// dieWithParent does nothing where the kernel offers no parent-death
// signal: a benchmark killed outright leaves its service processes running.
func dieWithParent(*exec.Cmd) {}
