//go:build unix && !linux

package main

import "syscall"

// stopWithParent does nothing where the kernel has no parent-death
// signal: a sluice killed outright leaves its command running.
func stopWithParent(*syscall.SysProcAttr) {}
