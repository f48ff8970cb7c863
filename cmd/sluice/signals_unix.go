//go:build unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// stopSignals stop sluice (and the demo); passSignals reach the command
// that serve or bench runs: SIGHUP too, which sluice serve reloads on.
var (
	stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}
	passSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}
)

// ownGroup puts cmd in a process group of its own, so that a terminal's ^C
// reaches it once, through sluice, not twice (the second, during its
// drain, would kill it); where the kernel can (Linux), cmd is sent
// SIGTERM when sluice dies without passing a signal on (SIGKILL), so that
// it drains and stops rather than keep its ports.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stopWithParent(cmd.SysProcAttr)
}

// signalGroup sends sig to cmd's process group: to the command, and under
// "go run" to the program go runs too (go itself leaves ^C to it).
func signalGroup(cmd *exec.Cmd, sig os.Signal) error {
	if s, ok := sig.(syscall.Signal); ok {
		return syscall.Kill(-cmd.Process.Pid, s)
	}
	return cmd.Process.Signal(sig)
}
