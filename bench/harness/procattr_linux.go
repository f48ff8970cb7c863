package harness

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill a service process if the benchmark
// dies without stopping it.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
