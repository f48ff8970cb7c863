package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/replay"
	"github.com/sluicehq/sluice/replay/accesslog"
)

const replayUsage = `Usage: sluice replay [flags] [log ...]

Decides every request of an access log under each rate-limit algorithm, in
simulated time from the log's timestamps, on the algorithms' Go twins (no
Redis), and reports who would have been denied. The logs are read in order
(rotated files oldest first); none, or "-", is standard input. gzip is read
directly. A line that cannot be parsed is counted and reported, never fatal.

What to replay: the policies of an httplimit policy file (--policies), or
one limit (--limit, with --burst, --algorithm, --routes, --cost). Each is
replayed under its own algorithm and every other at the same limit, unless
--algorithms lists some.

Flags:
`

type replayConfig struct {
	policies, limit, algorithm, algorithms, routes string
	burst, cost                                    int64
	format, key                                    string
	keyOf                                          keyOfFlag
	keysFrom                                       []string // the reader's keys: --key, or one per way the policies are keyed
	fields                                         accesslog.FieldNames
	target                                         string
	top, maxKeys                                   int
	markdown                                       bool
	jsonOut, htmlOut, progress                     string
	files                                          []string
}

func newReplayFlagSet(c *replayConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("sluice replay", flag.ContinueOnError)
	fs.StringVar(&c.policies, "policies", "", "an httplimit policy `file` (YAML or JSON) whose policies to replay")
	fs.StringVar(&c.limit, "limit", "", "the limit to replay when no --policies: `rate/period`, such as 100/1m")
	fs.Int64Var(&c.burst, "burst", 0, "with --limit: the burst (default: the rate)")
	fs.StringVar(&c.algorithm, "algorithm", "tokenbucket", "with --limit: the policy's own `algorithm`")
	fs.StringVar(&c.routes, "routes", "", "with --limit: comma-separated ServeMux `patterns` it applies to (default: every request)")
	fs.Int64Var(&c.cost, "cost", 1, "with --limit: what one request costs (a logged cost multiplies it)")
	fs.StringVar(&c.algorithms, "algorithms", "", "comma-separated `algorithms` to replay under (default: all five)")
	fs.StringVar(&c.format, "format", "auto", "the log's `format`: auto, common, combined, json or csv")
	fs.StringVar(&c.key, "key", "client", "what keys a request: `client` (its address, IPv6 by /64) or a logged field")
	c.keyOf = keyOfFlag{}
	fs.Var(c.keyOf, "key-of", "with --policies keyed by several headers: `HEADER=FIELD`, the log field holding a header (repeat it)")
	fs.StringVar(&c.fields.Time, "field-time", "", "JSON/CSV: the time field (default time)")
	fs.StringVar(&c.fields.Client, "field-client", "", "JSON/CSV: the client address field (default remote_addr)")
	fs.StringVar(&c.fields.Route, "field-route", "", "JSON/CSV: the route field (default route)")
	fs.StringVar(&c.fields.Method, "field-method", "", "JSON/CSV: the method field (default method)")
	fs.StringVar(&c.fields.Path, "field-path", "", "JSON/CSV: the path field (default path)")
	fs.StringVar(&c.fields.Cost, "field-cost", "", "JSON/CSV: the cost field (default cost)")
	fs.StringVar(&c.target, "target", "", "also find the smallest limit denying at most this `share` of keys, such as 1% or 0.01")
	fs.IntVar(&c.top, "top", 10, "how many keys to list by denials")
	fs.IntVar(&c.maxKeys, "max-keys", 1<<17, "keys the report keeps figures of before idle ones are forgotten (about 200 bytes each per algorithm)")
	fs.StringVar(&c.jsonOut, "json", "", "write the report as JSON to `file` (- for standard output, instead of the text)")
	fs.StringVar(&c.htmlOut, "html", "", "also write the report as an HTML page with charts to `file`")
	fs.BoolVar(&c.markdown, "markdown", false, "write the report on standard output as Markdown tables instead of text")
	fs.StringVar(&c.progress, "progress", "auto", "progress on standard error: auto (after 2 s, on a terminal), always or never")
	return fs
}

func printReplayUsage(w io.Writer) {
	fmt.Fprint(w, replayUsage)
	var c replayConfig
	fs := newReplayFlagSet(&c)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func parseReplayFlags(args []string) (replayConfig, replay.Config, error) {
	var c replayConfig
	fs := newReplayFlagSet(&c)
	fs.SetOutput(io.Discard)
	// Flags may follow the logs (sluice replay access.log --limit 100/1m).
	for {
		if err := fs.Parse(args); err != nil {
			return c, replay.Config{}, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			c.files = append(c.files, rest...) // after --, every argument is a log
			break
		}
		c.files, args = append(c.files, rest[0]), rest[1:]
	}
	cfg := replay.Config{TopKeys: c.top, MaxKeys: c.maxKeys}
	if c.top < 0 || c.maxKeys < 1 {
		return c, cfg, errors.New("--top must not be negative and --max-keys must be positive")
	}
	if c.top == 0 {
		cfg.TopKeys = -1 // none
	}
	keySet := false
	fs.Visit(func(f *flag.Flag) { keySet = keySet || f.Name == "key" })
	if c.markdown && c.jsonOut == "-" {
		return c, cfg, errors.New("--markdown and --json -: standard output takes one")
	}
	switch c.progress {
	case "auto", "always", "never":
	default:
		return c, cfg, fmt.Errorf("--progress %q: auto, always or never", c.progress)
	}
	if c.algorithms != "" {
		cfg.Algorithms = splitList(c.algorithms)
	}
	if c.target != "" {
		t, err := parseShare(c.target)
		if err != nil {
			return c, cfg, err
		}
		cfg.Target = t
	}
	switch {
	case c.policies != "" && c.limit != "":
		return c, cfg, errors.New("--policies and --limit: give one")
	case c.policies != "":
		data, err := os.ReadFile(c.policies)
		if err != nil {
			return c, cfg, err
		}
		if cfg.Policies, err = replay.LoadPolicies(data); err != nil {
			return c, cfg, err
		}
		keys, err := keyPolicies(cfg.Policies, c.key, keySet, c.keyOf)
		if err != nil {
			return c, cfg, err
		}
		c.keysFrom = keys
	case c.limit != "":
		if len(c.keyOf) > 0 {
			return c, cfg, errors.New("--key-of names the field of a policy file's header: with --limit, give --key")
		}
		c.keysFrom = []string{c.key}
		limit, err := parseLimit(c.limit, c.burst)
		if err != nil {
			return c, cfg, err
		}
		p := replay.Policy{Name: "limit", Algorithm: c.algorithm, Limit: limit, Cost: c.cost}
		if c.routes != "" {
			p.Routes = splitList(c.routes)
		}
		if c.cost < 1 {
			return c, cfg, fmt.Errorf("--cost %d: at least 1", c.cost)
		}
		cfg.Policies = []replay.Policy{p}
	default:
		return c, cfg, errors.New("nothing to replay: give --policies FILE or --limit RATE/PERIOD")
	}
	if _, err := accesslog.ParseFormat(c.format); err != nil {
		return c, cfg, err
	}
	return c, cfg, nil
}

// splitList splits a comma-separated flag, trimming spaces around each
// item and dropping empty ones ("POST /reports, GET /items").
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// parseLimit reads "100/1m" (or "100/m", "100/minute") and a burst.
func parseLimit(s string, burst int64) (sluice.Limit, error) {
	rate, per, ok := strings.Cut(s, "/")
	if !ok {
		return sluice.Limit{}, fmt.Errorf("--limit %q: want rate/period, such as 100/1m", s)
	}
	n, err := strconv.ParseInt(rate, 10, 64)
	if err != nil {
		return sluice.Limit{}, fmt.Errorf("--limit %q: the rate %q is not a whole number", s, rate)
	}
	units := map[string]time.Duration{"s": time.Second, "second": time.Second, "m": time.Minute, "minute": time.Minute,
		"h": time.Hour, "hour": time.Hour, "d": 24 * time.Hour, "day": 24 * time.Hour}
	period, ok := units[per]
	if !ok {
		if period, err = time.ParseDuration(per); err != nil {
			return sluice.Limit{}, fmt.Errorf("--limit %q: the period %q is not a duration (1m, 10s) or a unit (s, m, h, d)", s, per)
		}
	}
	l := sluice.Limit{Rate: n, Period: period, Burst: n}
	if burst != 0 {
		l.Burst = burst
	}
	if err := l.Validate(); err != nil {
		return sluice.Limit{}, fmt.Errorf("--limit %q: %w", s, err)
	}
	return l, nil
}

// parseShare reads "1%" or "0.01".
func parseShare(s string) (float64, error) {
	pct := strings.HasSuffix(s, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if pct {
		v /= 100
	}
	if err != nil || !(v > 0 && v < 1) {
		return 0, fmt.Errorf("--target %q: a share of keys between 0 and 1, such as 1%% or 0.01", s)
	}
	return v, nil
}

func runReplayCommand(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c, cfg, err := parseReplayFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		printReplayUsage(stdout)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "sluice replay: %v\n", err)
		fmt.Fprintln(stderr, "Run 'sluice replay -h' for usage.")
		return 2
	}
	if err := runReplay(ctx, c, cfg, stdin, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "sluice replay: %v\n", err)
		return 1
	}
	return 0
}

func runReplay(ctx context.Context, c replayConfig, cfg replay.Config, stdin io.Reader, stdout, stderr io.Writer) error {
	// Where the reports go is checked before a long replay, not after.
	for _, path := range []string{c.jsonOut, c.htmlOut} {
		if path != "" && path != "-" {
			if err := checkWritable(path); err != nil {
				return err
			}
		}
	}
	format, _ := accesslog.ParseFormat(c.format)
	opts := accesslog.Options{Format: format, Fields: c.fields, KeyFrom: c.keysFrom[0]}
	if len(c.keysFrom) > 1 {
		opts.KeysFrom = c.keysFrom
	}
	files, reordered, err := oldestFirst(c.files, opts)
	if err != nil {
		return err
	}
	if reordered {
		fmt.Fprintf(stderr, "sluice replay: reading the logs oldest first: %s\n", strings.Join(files, " "))
	}
	if isTerminal(stdin) && (len(files) == 0 || slices.Contains(files, "-")) {
		fmt.Fprintln(stderr, "sluice replay: reading the log from standard input (Ctrl-D ends it)")
	}
	src, err := openLogs(files, stdin, opts)
	if err != nil {
		return err
	}
	defer src.Close()
	prog := newProgress(c.progress, src, stderr)
	cfg.Progress = prog.update
	rep, err := replay.Run(ctx, src, cfg)
	prog.done()
	if ctx.Err() != nil {
		return errors.New("interrupted: no report")
	}
	if err != nil {
		return err
	}
	if rep.Input.Records == 0 {
		msg := "no request could be read from the log"
		if rep.Input.Skipped > 0 {
			e := rep.Input.SkippedLines[0]
			msg += fmt.Sprintf(": %d lines skipped, the first line %d: %s", rep.Input.Skipped, e.Line, e.Reason)
		}
		return errors.New(msg)
	}
	if rep.Input.Skipped > rep.Input.Records {
		fmt.Fprintf(stderr, "sluice replay: warning: %d lines skipped, more than the %d records read: check --format and the --field flags\n",
			rep.Input.Skipped, rep.Input.Records)
	}
	if c.htmlOut != "" {
		if err := writeFileWith(c.htmlOut, func(w io.Writer) error { return replay.WriteHTML(w, rep) }); err != nil {
			return err
		}
	}
	if c.jsonOut == "-" {
		return writeJSON(stdout, rep)
	}
	if c.jsonOut != "" {
		if err := writeFileWith(c.jsonOut, func(w io.Writer) error { return writeJSON(w, rep) }); err != nil {
			return err
		}
	}
	if c.markdown {
		return replay.WriteMarkdown(stdout, rep)
	}
	return replay.WriteText(stdout, rep)
}

func writeJSON(w io.Writer, rep *replay.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// checkWritable checks that a report can be written at path: its
// directory exists and takes a new file.
func checkWritable(path string) error {
	f, err := os.CreateTemp(dirOf(path), ".sluice-replay-*")
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, errors.Unwrap(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

// isTerminal reports whether r is a terminal (a character device).
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// writeFileWith writes a file through a temporary one renamed into place,
// so that a failed write leaves no half-written report.
func writeFileWith(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(dirOf(path), ".sluice-replay-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

func dirOf(path string) string {
	if i := strings.LastIndexByte(path, os.PathSeparator); i >= 0 {
		return path[:i+1]
	}
	return "."
}
