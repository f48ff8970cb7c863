//go:build !linux

package redistest

import "os/exec"

// dieWithParent is a no-op where the kernel cannot kill a child with its
// parent; Stop and Main still stop the servers of tests that end normally.
func dieWithParent(*exec.Cmd) {}
