// Command sluice-bench compares Sluice's algorithms and decorators with
// other Go rate limiters on the same Redis, scenario by scenario. It is
// run from the repository root as `go run ./bench/cmd/sluice-bench`, or installed.
//
//	sluice-bench [--full] [--redis auto|redis://host:port/db] [--duration 1.5s] [--rounds 3]
//	             [--json FILE] [--html FILE] [--docs DIR] [--scenarios substring] [--subjects substring]
//	             [--sluice-serve PATH] [--envoyproxy-ratelimit PATH]
//	sluice-bench --from-json FILE [--html FILE] [--docs DIR]
//
// With no flags it runs the quick set behind the headline comparison
// (harness.QuickScenarios and QuickSubjects) in under a minute and a half;
// --full runs every scenario and subject. A throughput scenario runs in
// --rounds rounds, each giving every subject a share of --duration in
// turn, so that a machine whose speed drifts during the run weighs on every
// subject alike; the headline gives each ratio's range over the rounds.
// --docs rewrites the figure blocks of the docs from the run
// (harness.UpdateDocs).
//
// Without --redis it runs on the embedded store (an in-process miniredis):
// no setup, and its latencies are not representative of a real Redis.
// --redis auto starts a throwaway redis-server on a free loopback port
// (it must be on the PATH) and stops it at the end.
//
// The serve scenarios (--scenarios serve) have subjects of their own: sluice
// serve's ShouldRateLimit over gRPC on loopback (and called in process)
// against a direct library call of the same algorithm (the table states
// each server's overhead over its direct call), and two processes started
// with the same envoyproxy/ratelimit YAML and environment on the same
// redis-server, called over gRPC: envoyproxy/ratelimit itself
// (--envoyproxy-ratelimit, else its service_cmd where the tests install
// it in the user cache directory, else service_cmd or ratelimit on the
// PATH) and sluice-serve in its compatible mode (--sluice-serve, else the
// one beside sluice-bench, else the one on the PATH). sluice-bench never
// runs go: when a binary is missing, the report says how to install it,
// and in the repository's checkout bench/run.sh runs this command with
// the checkout's sluice-serve and an installed envoyproxy/ratelimit. Those
// two need --redis; without it the report says why they did not run. Each
// subject runs there for a fifth of --duration.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/algorithms/tokenbucket"
	"github.com/sluicehq/sluice/bench/harness"
	"github.com/sluicehq/sluice/internal/envoyrl"
	"github.com/sluicehq/sluice/internal/redisproc"
	"github.com/sluicehq/sluice/store/embedded"
)

// defaultRounds is --rounds when not given.
const defaultRounds = 3

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "sluice bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sluice bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	redisURL := fs.String("redis", "", `"auto" to start a redis-server, or a redis:// URL; empty: the embedded store`)
	duration := fs.Duration("duration", 0, "how long each timed scenario runs (default 1.5s, or 3s with --full)")
	full := fs.Bool("full", false, "run every scenario and subject (minutes); default: the quick set behind the headline comparison")
	jsonPath := fs.String("json", "", "write the results as JSON to this file")
	htmlPath := fs.String("html", "", "write a self-contained HTML report to this file")
	onlyScenarios := fs.String("scenarios", "", "run only scenarios whose name contains this (or one of these, comma-separated)")
	onlySubjects := fs.String("subjects", "", "run only subjects whose name contains this (or one of these, comma-separated)")
	rounds := fs.Int("rounds", defaultRounds, "split each throughput scenario into this many rounds, each running every subject in turn, so that the machine's drift weighs on all alike (1 to 20)")
	fromJSON := fs.String("from-json", "", "run nothing: render the table (and --html) from a saved --json file")
	sluiceServe := fs.String("sluice-serve", "", "the sluice-serve the serve scenarios start (default: the one beside sluice-bench, else on the PATH)")
	envoyProxy := fs.String("envoyproxy-ratelimit", "", "envoyproxy/ratelimit's service_cmd the serve scenarios start (default: the one the tests install in the user cache directory, else service_cmd or ratelimit on the PATH)")
	docsRoot := fs.String("docs", "", "rewrite the figure blocks of DIR/README.md and DIR/docs/*.md from this run (needs --full and --json inside DIR, or --from-json)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *fromJSON != "" {
		// A saved run renders again; the flags of a run do not apply.
		var ignored []string
		fs.Visit(func(f *flag.Flag) {
			if f.Name != "from-json" && f.Name != "html" && f.Name != "docs" {
				ignored = append(ignored, "--"+f.Name)
			}
		})
		if len(ignored) > 0 {
			return fmt.Errorf("--from-json renders a saved run: %s would not apply (only --html and --docs do)", strings.Join(ignored, ", "))
		}
		data, err := os.ReadFile(*fromJSON)
		if err != nil {
			return err
		}
		var report harness.Report
		if err := json.Unmarshal(data, &report); err != nil {
			return fmt.Errorf("--from-json: %w", err)
		}
		if err := output(stdout, report, "", *htmlPath); err != nil {
			return err
		}
		return updateDocs(stdout, *docsRoot, report, *fromJSON)
	}
	// A binary named but not there is found before the run, not by each
	// serve scenario's subject.
	for name, path := range map[string]string{"--sluice-serve": *sluiceServe, "--envoyproxy-ratelimit": *envoyProxy} {
		if path != "" && !envoyrl.IsExecutable(path) {
			return fmt.Errorf("%s %s: not an executable file", name, path)
		}
	}
	if *docsRoot != "" {
		// Checked before the run, so that a run cannot end with docs
		// that name a file it did not write, or a command it did not run:
		// the docs name `--full --redis auto` with the default duration
		// and rounds.
		if !*full || *onlyScenarios != "" || *onlySubjects != "" || *jsonPath == "" {
			return errors.New("--docs needs --full, no --scenarios or --subjects, and --json (the file the docs will name)")
		}
		if *redisURL != "auto" || *duration != 0 || *rounds != defaultRounds {
			return fmt.Errorf("--docs needs --redis auto and the default --duration and --rounds (%d): the docs name that command", defaultRounds)
		}
		if err := harness.CheckDocsTarget(*docsRoot, *jsonPath); err != nil {
			return fmt.Errorf("--docs: %w", err)
		}
		// The serve block quotes both processes: a run without them
		// would end with docs that say they were skipped.
		found, err := (harness.Binaries{SluiceServe: *sluiceServe, EnvoyProxy: *envoyProxy}).Find()
		if err == nil {
			err = found.CheckForDocs()
		}
		if err != nil {
			return fmt.Errorf("--docs: the serve scenarios' processes: %w (in the repository's checkout, bench/run.sh runs this command with both)", err)
		}
		fmt.Fprintf(stdout, "serve scenarios: sluice-serve %s, envoyproxy/ratelimit %s\n", found.SluiceServe, found.EnvoyProxy)
	}
	if *duration == 0 {
		*duration = 1500 * time.Millisecond
		if *full {
			*duration = 3 * time.Second
		}
	}
	if *rounds < 1 || *rounds > 20 {
		return fmt.Errorf("--rounds %d: must be between 1 and 20", *rounds)
	}
	if *duration < 100*time.Millisecond || *duration > 10*time.Minute {
		return fmt.Errorf("--duration %s: must be between 100ms and 10m", *duration)
	}
	if *duration/time.Duration(*rounds) < 100*time.Millisecond {
		return fmt.Errorf("--duration %s in --rounds %d: a round would be under 100ms", *duration, *rounds)
	}

	report := harness.Report{Started: time.Now(), Machine: fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())}
	clients := harness.Clients{Binaries: harness.Binaries{SluiceServe: *sluiceServe, EnvoyProxy: *envoyProxy}}
	var stats *redis.Client
	switch *redisURL {
	case "":
		store, err := embedded.Start()
		if err != nil {
			return err
		}
		defer store.Close()
		clients.GoRedis = redis.NewClient(&redis.Options{Addr: store.Addr(), MaxRetries: -1, PoolSize: 64})
		report.Redis = "embedded (miniredis, in process)"
	default:
		addr := ""
		if *redisURL == "auto" {
			server, err := redisproc.Start()
			if err != nil {
				return fmt.Errorf("--redis auto: %w", err)
			}
			defer server.Stop()
			fmt.Fprintf(stderr, "started redis-server (pid %d) on %s\n", server.Pid, server.Addr)
			addr = server.Addr
		} else {
			opt, err := redis.ParseURL(*redisURL)
			if err != nil {
				return fmt.Errorf("--redis: %w", err)
			}
			addr = opt.Addr
		}
		clients.GoRedis = redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 64})
		if *redisURL != "auto" {
			if err := ensureEmpty(ctx, clients.GoRedis); err != nil {
				_ = clients.GoRedis.Close()
				return fmt.Errorf("--redis %s: %w", addr, err)
			}
		}
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		if err != nil {
			return fmt.Errorf("rueidis: %w", err)
		}
		defer rc.Close()
		clients.Rueidis = rc
		stats = redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		defer stats.Close()
		version := "?"
		if info, err := stats.Info(ctx, "server").Result(); err == nil {
			for _, line := range strings.Split(info, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
					version = v
				}
			}
		}
		report.Redis = fmt.Sprintf("redis-server %s at %s", version, addr)
		report.Representative = true
	}
	defer clients.GoRedis.Close()

	// Without --full or a selection, the quick set: what the headline
	// needs.
	quick := !*full && *onlyScenarios == "" && *onlySubjects == ""
	report.Full = *full && *onlyScenarios == "" && *onlySubjects == ""
	var scenarios []harness.Scenario
	for _, s := range harness.Scenarios() {
		if harness.MatchesAny(s.Name, *onlyScenarios) && (!quick || slices.Contains(harness.QuickScenarios, s.Name)) {
			scenarios = append(scenarios, s)
		}
	}
	var subjects []harness.Subject
	for _, s := range harness.Subjects() {
		if harness.MatchesAny(s.Name, *onlySubjects) && (!quick || slices.Contains(harness.QuickSubjects, s.Name)) {
			subjects = append(subjects, s)
		}
	}
	if quick {
		fmt.Fprintln(stderr, "the quick set behind the headline; --full runs every scenario and subject")
	}
	opts := harness.Options{
		Duration: *duration, Scenarios: scenarios, Subjects: subjects, OnlySubjects: *onlySubjects,
		Clients: clients, Stats: stats, Progress: stderr, Rounds: *rounds,
	}
	report.Rounds = *rounds
	runs := harness.Planned(opts)
	if runs == 0 {
		return errors.New("no scenario or no subject matches")
	}
	fmt.Fprintf(stderr, "sluice bench on %s: %d scenarios, %d runs\n", report.Redis, len(scenarios), runs)
	if report.Representative {
		if c, err := redisBenchmark(ctx, stats); err != nil {
			fmt.Fprintf(stderr, "redis-benchmark ceiling not measured: %v\n", err)
		} else {
			report.Ceilings = append(report.Ceilings, c)
		}
	}
	report.Results = harness.Run(ctx, opts)
	report.Headline = harness.HeadlineOf(report)
	if err := output(stdout, report, *jsonPath, *htmlPath); err != nil {
		return err
	}
	return updateDocs(stdout, *docsRoot, report, *jsonPath)
}

// ensureEmpty refuses a server that holds any key: the benchmark runs
// FLUSHALL before every run, and must never be the reason a server lost
// its data.
func ensureEmpty(ctx context.Context, c *redis.Client) error {
	info, err := c.Info(ctx, "keyspace").Result()
	if err != nil {
		return err
	}
	var keys int64
	for _, line := range strings.Split(info, "\n") {
		_, fields, ok := strings.Cut(strings.TrimSpace(line), ":keys=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(fields, ",")
		k, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			return fmt.Errorf("INFO keyspace: %q", line)
		}
		keys += k
	}
	if keys > 0 {
		return fmt.Errorf("the server is not empty (%d keys), and the benchmark runs FLUSHALL between runs: point it at an empty server (or use --redis auto)", keys)
	}
	return nil
}

// updateDocs rewrites the docs' figure blocks from report, saved as
// jsonFile, when --docs names the repository's root.
func updateDocs(stdout io.Writer, root string, report harness.Report, jsonFile string) error {
	if root == "" {
		return nil
	}
	changed, err := harness.UpdateDocs(root, report, jsonFile)
	fmt.Fprintf(stdout, "--docs: %d files rewritten\n", len(changed))
	for _, f := range changed {
		if rel, err := filepath.Rel(root, f); err == nil {
			f = rel
		}
		fmt.Fprintln(stdout, "  "+filepath.ToSlash(f))
	}
	if err != nil {
		return fmt.Errorf("--docs: %w", err)
	}
	return nil
}

// output writes the table, and the JSON and HTML files when asked.
func output(stdout io.Writer, report harness.Report, jsonPath, htmlPath string) error {
	if err := harness.WriteTable(stdout, report); err != nil {
		return err
	}
	if err := harness.WriteHeadline(stdout, report); err != nil {
		return err
	}
	if jsonPath != "" {
		if err := writeFile(jsonPath, func(w io.Writer) error { return harness.WriteJSON(w, report) }); err != nil {
			return err
		}
	}
	if htmlPath != "" {
		if err := writeFile(htmlPath, func(w io.Writer) error { return harness.WriteHTML(w, report) }); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes what write produces to path, or leaves path as it was.
func writeFile(path string, write func(io.Writer) error) error {
	var b bytes.Buffer
	if err := write(&b); err != nil {
		return err
	}
	return harness.WriteFileAtomic(path, b.Bytes())
}

// redisBenchmark measures the ceiling for the token bucket's script on
// this server: redis-benchmark with 128 connections, 16 commands pipelined
// per connection, EVALSHA on one hot key with a limit that allows all.
func redisBenchmark(ctx context.Context, c *redis.Client) (harness.Ceiling, error) {
	path, err := exec.LookPath("redis-benchmark")
	if err != nil {
		return harness.Ceiling{}, errors.New("redis-benchmark is not on the PATH")
	}
	script := tokenbucket.Script()
	if err := c.ScriptLoad(ctx, script.Source()).Err(); err != nil {
		return harness.Ceiling{}, err
	}
	opt := c.Options()
	host, port, err := net.SplitHostPort(opt.Addr)
	if err != nil {
		return harness.Ceiling{}, err
	}
	args := []string{"-h", host, "-p", port, "-c", "128", "-P", "16", "-n", "400000", "-q",
		"EVALSHA", script.SHA1(), "1", "rl:{ceiling}:tb", "1000000", "1000000", "1000000000", "1"}
	out, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
	if err != nil {
		return harness.Ceiling{}, fmt.Errorf("%v: %s", err, out)
	}
	// "EVALSHA ...: 123456.79 requests per second, p50=..."
	text := string(out)
	if i := strings.LastIndex(text, ": "); i >= 0 {
		fields := strings.Fields(text[i+2:])
		if len(fields) > 0 {
			if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
				return harness.Ceiling{
					Name:           "redis-benchmark -P 16, the token bucket's script, one hot key",
					Command:        "redis-benchmark " + strings.Join(args, " "),
					RequestsPerSec: v,
				}, nil
			}
		}
	}
	return harness.Ceiling{}, fmt.Errorf("unexpected redis-benchmark output %q", text)
}
