package main

import (
	"log/slog"
	"os"
)

// ignoreWhileDraining logs and drops every signal received on signals
// until the returned func is called, so that a signal sent again during a
// drain does not end it: once signal.Stop is called, a second SIGTERM or
// SIGINT kills the process at once, and one is often sent. The kernel
// sends Pdeathsig once per thread of a parent that dies, and an operator
// may press Ctrl-C twice. The drain is bounded by its own timeout.
func ignoreWhileDraining(signals <-chan os.Signal, logger *slog.Logger, prefix string) (stop func()) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case sig := <-signals:
				logger.Warn(prefix+": already draining; signal ignored", "signal", sig.String())
			case <-done:
				return
			}
		}
	}()
	return func() { close(done); <-stopped }
}
