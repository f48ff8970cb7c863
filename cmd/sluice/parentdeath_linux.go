package main

import "syscall"

// stopWithParent has the kernel send SIGTERM to the child when sluice
// dies.
func stopWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGTERM }
