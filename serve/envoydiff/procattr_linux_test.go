package envoydiff_test

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes the kernel kill a service if the test binary dies
// without stopping it (a panic, a -timeout).
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
