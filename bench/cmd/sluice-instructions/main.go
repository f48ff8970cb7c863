// Command sluice-instructions measures what a decision costs the Redis
// server, in CPU instructions rather than seconds: each case runs against
// its own throwaway redis-server under valgrind's callgrind, collecting
// only inside EVALSHA (evalShaCommand and everything it calls), and makes
// its calls through Sluice's public API (the algorithms' AllowN and
// AllowBatch, multilimit, the lease scripts), so it measures whatever
// arguments the scripts take. Instruction counts repeat exactly for the
// same binary and inputs, whatever else the machine does.
//
//	go run ./bench/cmd/sluice-instructions                 # every case
//	go run ./bench/cmd/sluice-instructions -run tokenbucket -n 500
//	go run ./bench/cmd/sluice-instructions -json bench/runs/instructions.json
//	go run ./bench/cmd/sluice-instructions -body bench/runs/scratch/fixedwindow-pttl.lua -args 1000000,1000000,1000000,1
//
// It needs valgrind and redis-server on PATH, and listens on loopback
// ports only; every server it starts is shut down before the next case.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"time"
)

// keepDir, when set, receives each case's callgrind.out.
var keepDir string

// Result is one case's measurement.
type Result struct {
	Case string `json:"case"`
	// Decisions per EVALSHA call.
	PerCall int `json:"decisions_per_call"`
	// Calls is the EVALSHA calls INFO commandstats counted.
	Calls int64 `json:"calls"`
	// Instructions collected inside EVALSHA, in all.
	Instructions int64 `json:"instructions"`
	// PerDecision is Instructions / Calls / PerCall.
	PerDecision int64 `json:"instructions_per_decision"`
	// Target is issue 28's ceiling for the case, 0 when it sets none.
	Target int64 `json:"target,omitempty"`
}

// Run is what -json writes.
type Run struct {
	Redis   string    `json:"redis"`
	N       int       `json:"n"`
	Results []Result  `json:"results"`
	When    time.Time `json:"when"`
}

func main() {
	n := flag.Int("n", 2000, "decisions per case (batches: n/16 calls)")
	only := flag.String("run", "", "only the cases whose name matches this regular expression")
	jsonOut := flag.String("json", "", "also write the results as JSON to `file`")
	flag.StringVar(&keepDir, "keep", "", "keep each case's callgrind output in `dir`, for callgrind_annotate")
	body := flag.String("body", "", "measure only this Lua `file`, as a decision script's body after the prelude, taking -args")
	args := flag.String("args", "1000000,1000000,1000000000000,1", "-body's numbers (rate, period_us, burst, cost), sent packed")
	fresh := flag.Bool("fresh", false, "-body on a new key every call")
	flag.Parse()
	list := cases
	if *body != "" {
		c, err := bodyCase(*body, *args, *fresh)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sluice-instructions:", err)
			os.Exit(2)
		}
		list = func() []testCase { return []testCase{c} }
	}
	if err := run(list, *n, *only, *jsonOut, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sluice-instructions:", err)
		os.Exit(1)
	}
}

func run(cases func() []testCase, n int, only, jsonOut string, w io.Writer) error {
	if n < 16 {
		return fmt.Errorf("-n %d: at least 16", n)
	}
	re, err := regexp.Compile(only)
	if err != nil {
		return fmt.Errorf("-run: %w", err)
	}
	version, err := redisVersion()
	if err != nil {
		return err
	}
	out := Run{Redis: version, N: n, When: time.Now().UTC().Truncate(time.Second)}
	fmt.Fprintf(w, "redis-server %s, %d decisions per case\n", version, n)
	fmt.Fprintf(w, "%-40s %12s %12s  %s\n", "case", "per call", "per decision", "target")
	ctx := context.Background()
	for _, c := range cases() {
		if !re.MatchString(c.name) {
			continue
		}
		r, err := measure(ctx, c, n)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		out.Results = append(out.Results, r)
		target := "-"
		if r.Target > 0 {
			target = fmt.Sprint(r.Target)
			if r.PerDecision > r.Target {
				target += " (over)"
			}
		}
		if _, err := fmt.Fprintf(w, "%-40s %12d %12d  %s\n", r.Case, r.Instructions/max(r.Calls, 1), r.PerDecision, target); err != nil {
			return err
		}
	}
	if jsonOut == "" {
		return nil
	}
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(jsonOut, append(data, '\n'), 0o644)
}
