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
	"strings"
	"time"
)

const usage = `Sluice: a distributed rate limiter on Redis.

Usage:

	sluice <command> [flags]

Commands:

	demo    show that per-pod limiters admit N times the limit behind a load
	        balancer, and that one shared Sluice bucket does not
	bench   compare Sluice's algorithms with other Go limiters on the same
	        Redis (runs the bench module; "sluice bench -h" for its flags)
	serve   the limiter as a service: Envoy's rate-limit service (gRPC) and
	        a JSON API (runs the serve module; "sluice serve -h" for its flags)
	help    print this help; "sluice help demo" prints the demo's flags
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches args (without the program name) to a command and returns
// the exit status: 0 on success, 1 when the command fails, 2 for a usage
// error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "demo":
		return runDemoCommand(ctx, rest, stdout, stderr)
	case "bench":
		return runModuleCommand(ctx, "bench", "sluice-bench", rest, stdout, stderr)
	case "serve":
		return runModuleCommand(ctx, "serve", "sluice-serve", rest, stdout, stderr)
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
// does not depend on): it execs "go -C <module> run ./cmd/<command>".
func runModuleCommand(ctx context.Context, module, command string, args []string, stdout, stderr io.Writer) int {
	dir, err := moduleDir(module, command)
	if err != nil {
		fmt.Fprintf(stderr, "sluice %s: %v\n", module, err)
		return 1
	}
	cmd := exec.CommandContext(ctx, "go", append([]string{"-C", dir, "run", "./cmd/" + command}, absPathFlags(args)...)...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// On ^C, let the command stop as it would alone (sluice serve drains
	// its calls and closes its leases) rather than killing it.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 15 * time.Second
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		fmt.Fprintf(stderr, "sluice %s: %v\n", module, err)
		return 1
	}
	return 0
}

// absPathFlags makes the file arguments of --json, --html, --from-json,
// --docs and --config absolute: the command runs in its module's directory.
func absPathFlags(args []string) []string {
	out := make([]string, len(args))
	copy(out, args)
	isPathFlag := func(name string) bool {
		name = strings.TrimLeft(name, "-")
		return name == "json" || name == "html" || name == "from-json" || name == "config" || name == "docs"
	}
	for i := 0; i < len(out); i++ {
		name, value, hasValue := strings.Cut(out[i], "=")
		if !strings.HasPrefix(name, "-") || !isPathFlag(name) {
			continue
		}
		if hasValue {
			if abs, err := filepath.Abs(value); err == nil {
				out[i] = name + "=" + abs
			}
		} else if i+1 < len(out) {
			if abs, err := filepath.Abs(out[i+1]); err == nil {
				out[i+1] = abs
			}
			i++
		}
	}
	return out
}

// moduleDir finds a module of the repository: ./<module> from the
// repository root, where "go run ./cmd/sluice" is run.
func moduleDir(module, command string) (string, error) {
	for _, dir := range []string{module, "../" + module, "../../" + module} {
		if _, err := os.Stat(filepath.Join(dir, "cmd", command, "main.go")); err == nil {
			return filepath.Abs(dir)
		}
	}
	return "", fmt.Errorf("the %s module is not here: run it from the repository root (go run ./cmd/sluice %s)", module, module)
}
