// Command sluice is Sluice's command-line tool.
//
// Usage:
//
//	sluice <command> [flags]
//
// The commands are:
//
//	demo    reproduce the problem Sluice solves: per-pod limiters behind a
//	        load balancer admit N times the limit, one shared bucket does not
//	replay  decide an access log's requests under each algorithm, in
//	        simulated time, and report whom each would have denied
//	        (docs/choosing.md; "sluice replay -h" for its flags)
//	help    print this help, or "sluice help demo" for the demo's flags
//
// # sluice demo
//
// The demo simulates one client sending requests at a fixed rate through a
// round-robin load balancer to N pods, under a limit of L requests per
// minute, for N in each of the --pods counts. It runs the token bucket twice
// for every N:
//
//   - per-pod: every pod has its own token bucket on its own in-process
//     memstore, so each pod counts only the requests it sees;
//   - shared: every pod has a token bucket on one shared store and uses the
//     same key, which is how Sluice is deployed.
//
// It prints, side by side, the requests sent, what each setup admitted, the
// ideal (what the limit permits over the duration: Burst + Rate × T / Period,
// capped at the requests sent) and the over-admission factor (admitted /
// ideal). Every admitted count comes from running the limiters; only the
// ideal is computed.
//
// Time is simulated: a fake clock is sent with every call (the token
// bucket's client-clock mode, tokenbucket.WithClock), so minutes of
// traffic take milliseconds.
//
// The shared bucket runs on the embedded store (an in-process miniredis
// running the Lua script) unless --redis names a Redis server, for example
// --redis redis://localhost:6379/0; the demo then writes its keys under a
// random prefix unique to the run and deletes them at the end.
//
// Flags:
//
//	--limit N      requests allowed per minute, also the burst (default 60)
//	--rate R       requests per second the client sends (default 20)
//	--duration D   simulated duration, such as 90s or 3m (default 3m)
//	--pods LIST    comma-separated pod counts (default "2,4,10")
//	--redis URL    run the shared bucket on this Redis instead of the
//	               embedded store
//
// # Exit status
//
// 0 on success, 1 when the demo fails (for example Redis is unreachable),
// 2 for a usage error: an unknown command, a bad flag or a bad value.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
)

const usage = `Sluice: a distributed rate limiter on Redis.

Usage:

	sluice <command> [flags]

Commands:

	demo    show that per-pod limiters admit N times the limit behind a load
	        balancer, and that one shared Sluice bucket does not
	replay  decide an access log's requests under each algorithm, in
	        simulated time, and report whom each would have denied
	        ("sluice replay -h" for its flags)
	bench   compare Sluice's algorithms with other Go limiters on the same
	        Redis (runs sluice-bench; "sluice bench -h" for its flags)
	serve   the limiter as a service: Envoy's rate-limit service (gRPC) and
	        a JSON API (runs sluice-serve; "sluice serve -h" for its flags)
	help    print this help; "sluice help demo" prints the demo's flags

bench and serve run the sluice-bench and sluice-serve installed beside
sluice or on PATH, passing SIGINT, SIGTERM and SIGHUP on. Install them with

	go install github.com/sluicehq/sluice/bench/cmd/sluice-bench@latest
	go install github.com/sluicehq/sluice/serve/cmd/sluice-serve@latest
`

func main() {
	// SIGINT and SIGTERM end the demo (the context); they and SIGHUP
	// reach the command that serve or bench runs (the channel).
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, passSignals...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	forward := make(chan os.Signal, 4)
	go func() {
		for sig := range signals {
			if slices.Contains(stopSignals, sig) {
				cancel()
			}
			select {
			case forward <- sig:
			default:
			}
		}
	}()
	os.Exit(runWith(ctx, forward, os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches args (without the program name) to a command and returns
// the exit status: 0 on success, 1 when the command fails, 2 for a usage
// error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWith(ctx, nil, args, stdout, stderr)
}

// runWith is run with the signals to pass on to the command that serve or
// bench runs.
func runWith(ctx context.Context, signals <-chan os.Signal, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "demo":
		return runDemoCommand(ctx, rest, stdout, stderr)
	case "replay":
		return runReplayCommand(ctx, rest, os.Stdin, stdout, stderr)
	case "bench":
		return runModuleCommand(ctx, signals, "bench", "sluice-bench", rest, stdout, stderr)
	case "serve":
		return runModuleCommand(ctx, signals, "serve", "sluice-serve", rest, stdout, stderr)
	case "help", "-h", "-help", "--help":
		return runHelp(rest, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "sluice: unknown command %q\n\n", cmd)
		fmt.Fprint(stderr, usage)
		return 2
	}
}

func runHelp(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		fmt.Fprint(stdout, usage)
		return 0
	case len(args) == 1 && args[0] == "demo":
		printDemoUsage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "sluice help: unknown help topic %q\n\n", args[0])
		fmt.Fprint(stderr, usage)
		return 2
	}
}

func runDemoCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseDemoFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		printDemoUsage(stdout)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "sluice demo: %v\n", err)
		fmt.Fprintln(stderr, "Run 'sluice help demo' for usage.")
		return 2
	}
	if err := runDemo(ctx, stdout, cfg); err != nil {
		fmt.Fprintf(stderr, "sluice demo: %v\n", err)
		return 1
	}
	return 0
}

// runModuleCommand runs a command that lives in a module of its own (bench
// imports other rate limiters, serve gRPC and Envoy's API, which the core
// does not depend on), git-style: the installed sluice-<name> beside this
// executable or on PATH, in this directory, with these arguments, and
// every signal received passed on to it, so that SIGTERM and SIGINT let
// sluice serve drain its calls and close its leases. It never runs go:
// without the command it says how to install it.
func runModuleCommand(ctx context.Context, signals <-chan os.Signal, module, command string, args []string, stdout, stderr io.Writer) int {
	bin, err := installed(command)
	if err != nil {
		fmt.Fprintf(stderr, "sluice %s: %s is not installed beside sluice or on PATH (%v); install it with\n\n\tgo install github.com/sluicehq/sluice/%s/cmd/%s@latest\n\nor, in a checkout of the repository, run it with go run ./%s/cmd/%s\n",
			module, command, err, module, command, module, command)
		return 1
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "sluice %s: %v\n", module, err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case sig := <-signals:
			_ = signalGroup(cmd, sig)
			continue
		case err := <-done:
			var exit *exec.ExitError
			switch {
			case err == nil:
				return 0
			case errors.As(err, &exit):
				return exit.ExitCode()
			}
			fmt.Fprintf(stderr, "sluice %s: %v\n", module, err)
			return 1
		}
	}
}

// installed finds the executable command beside this executable, else on
// PATH.
func installed(command string) (string, error) {
	if self, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(self), command)
		if info, err := os.Stat(beside); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
			return beside, nil
		}
	}
	return exec.LookPath(command)
}
