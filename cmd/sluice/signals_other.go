//go:build !unix

package main

import (
	"os"
	"os/exec"
)

// stopSignals stop sluice (and the demo); passSignals reach the command
// that serve or bench runs.
var (
	stopSignals = []os.Signal{os.Interrupt}
	passSignals = stopSignals
)

// ownGroup leaves cmd in sluice's process group.
func ownGroup(*exec.Cmd) {}

// signalGroup sends sig to cmd.
func signalGroup(cmd *exec.Cmd, sig os.Signal) error { return cmd.Process.Signal(sig) }
