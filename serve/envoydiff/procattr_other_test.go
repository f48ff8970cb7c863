//go:build unix && !linux

package envoydiff_test

import "os/exec"

// dieWithTest: only Linux has a parent-death signal; elsewhere the
// cleanup's kill is all there is.
func dieWithTest(*exec.Cmd) {}
