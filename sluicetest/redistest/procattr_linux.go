package redistest

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill redis-server if the test binary dies
// without stopping it (a panic, a -timeout, SIGKILL), so that no server
// outlives its tests.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
