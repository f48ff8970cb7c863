package harness

// This file renders each figure table that docs.go writes into a block of
// README.md or docs/*.md, from one Report.

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// docsSource says where a block's figures come from, in one line.
func docsSource(r Report, jsonPath string) string {
	server, _, _ := strings.Cut(r.Redis, " at ")
	return fmt.Sprintf("From `%s` (%s; %s, the benchmark sharing the machine with the server), "+
		"written by `%s --full --redis auto --json %s --docs .`.",
		jsonPath, server, r.Machine, docsCommand, jsonPath)
}

// docsCommand is the command the blocks say wrote them, run from the
// repository's root; bench/run.sh runs it, with the serve scenarios'
// binaries.
const docsCommand = "go run ./bench/cmd/sluice-bench"

// docsResults finds a result by scenario and subject.
type docsResults struct {
	byKey     map[[2]string]Result
	scenarios map[string][]string // subjects, in the report's order
	ceilings  []Ceiling
	remote    map[string]bool // subjects that talk to Redis, by name
}

func docsIndex(r Report) docsResults {
	idx := docsResults{byKey: map[[2]string]Result{}, scenarios: map[string][]string{}, ceilings: r.Ceilings, remote: map[string]bool{}}
	for _, sub := range append(Subjects(), ServeSubjects()...) {
		idx.remote[sub.Name] = sub.Remote
	}
	for _, res := range r.Results {
		idx.byKey[[2]string{res.Scenario, res.Subject}] = res
		idx.scenarios[res.Scenario] = append(idx.scenarios[res.Scenario], res.Subject)
	}
	return idx
}

func (d docsResults) need(scenarios ...string) error {
	var missing []string
	for _, s := range scenarios {
		if len(d.scenarios[s]) == 0 {
			missing = append(missing, strconv.Quote(s))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the report has no scenario %s (run sluice bench --full)", strings.Join(missing, ", "))
	}
	return nil
}

// limit is the limit of the scenario's runs, as the first result that
// names one says.
func (d docsResults) limit(scenario string) string {
	for _, subj := range d.scenarios[scenario] {
		if l := d.byKey[[2]string{scenario, subj}].Limit; l != "" {
			return l
		}
	}
	return "unknown"
}

func (d docsResults) get(scenario, subject string) (Result, bool) {
	res, ok := d.byKey[[2]string{scenario, subject}]
	return res, ok && res.Error == ""
}

// subjects lists the subjects of the scenarios, each once, in order of
// first appearance.
func (d docsResults) subjects(scenarios ...string) []string {
	var out []string
	for _, s := range scenarios {
		for _, subj := range d.scenarios[s] {
			if !slices.Contains(out, subj) {
				out = append(out, subj)
			}
		}
	}
	return out
}

// errorNotes lists the subjects that failed in the scenarios, with their
// error's first line, as Markdown list items.
func (d docsResults) errorNotes(subjects []string, scenarios ...string) string {
	var b strings.Builder
	for _, subj := range subjects {
		for _, sc := range scenarios {
			res, ok := d.byKey[[2]string{sc, subj}]
			if !ok || res.Error == "" {
				continue
			}
			msg, _, _ := strings.Cut(res.Error, "\n")
			fmt.Fprintf(&b, "- %s, %s: %s\n", subj, sc, outShorten(msg, 200))
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "\n" + docsNone + " where a subject failed or was not run; the failures:\n\n" + b.String()
}

func docsTable(header []string, rows [][]string) string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(header, " | ") + " |\n")
	b.WriteString("|" + strings.Repeat(" --- |", len(header)) + "\n")
	for _, row := range rows {
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	return b.String()
}

const docsNone = "—"

func docsRate(v float64) string { return thousands(v) }

func docsFixed(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }

// docsMeasured prints v with format, or docsNone where it was not
// measured (negative, or zero for memory).
func docsMeasured(v float64, format func(float64) string, zeroMeasured bool) string {
	if v < 0 || (v == 0 && !zeroMeasured) {
		return docsNone
	}
	return format(v)
}

func docsBytes(v float64) string { return docsFixed(v, 0) }

// docsCalls prints Redis calls per decision: two decimals, or two
// significant digits below 0.1 (a lease's few calls).
func docsCalls(v float64) string {
	if v > 0 && v < 0.1 {
		return strconv.FormatFloat(v, 'g', 2, 64)
	}
	return docsFixed(v, 2)
}

func docsHeadline(r Report) (string, error) {
	hs := HeadlineOf(r)
	if len(hs) == 0 {
		return "", errors.New("the report has no headline (no throughput scenario with its subjects)")
	}
	header := []string{"comparison"}
	for _, h := range hs {
		col := strings.TrimPrefix(h.Scenario, "throughput: ")
		col, _, _ = strings.Cut(col, ", 128")
		header = append(header, col)
	}
	type row struct {
		label string
		cells []string
	}
	var rows []row
	rounds := false
	find := func(label string) *row {
		for i := range rows {
			if rows[i].label == label {
				return &rows[i]
			}
		}
		rows = append(rows, row{label: label, cells: make([]string, len(hs))})
		return &rows[len(rows)-1]
	}
	for i, h := range hs {
		for _, l := range h.Rows {
			d := find(l.Label + ": decisions/s")
			d.cells[i] = fmt.Sprintf("%.2f ×%s (%s vs %s)", l.DecisionsRatio, RangeText(l.DecisionsRatioRange), thousands(l.SubjectDecisions), thousands(l.OtherDecisions))
			if l.DecisionsRatioRange != nil {
				rounds = true
			}
			if l.ServerMicrosRatio > 0 {
				c := find(l.Label + ": Redis CPU per decision")
				c.cells[i] = fmt.Sprintf("%.2f ×%s", l.ServerMicrosRatio, RangeText(l.ServerMicrosRatioRange))
			}
		}
	}
	var cells [][]string
	for _, row := range rows {
		for i, c := range row.cells {
			if c == "" {
				row.cells[i] = docsNone
			}
		}
		cells = append(cells, append([]string{row.label}, row.cells...))
	}
	note := ""
	if rounds {
		note = " In brackets, the smallest and largest of the ratios round by round (each round runs every subject once, in turn)."
	}
	return "128 goroutines, every request allowed; \"coalesced\" is `coalesce.New(tokenbucket)` through rueidis, " +
		"\"uncoalesced\" one script call per decision." + note + "\n\n" + docsTable(header, cells), nil
}

func docsAccuracy(d docsResults) (string, error) {
	scenarios := []string{scenarioSteady, scenarioBurst, scenarioBoundary, scenarioPods, scenarioSkewed}
	if err := d.need(scenarios...); err != nil {
		return "", err
	}
	header := []string{"subject", "steady 80/s", "burst after idle", "boundary attack", "pods 4 → 10 → 2", "skewed tenants"}
	subjects := d.subjects(scenarios...)
	var rows [][]string
	for _, subj := range subjects {
		row := []string{subj}
		for _, sc := range scenarios {
			res, ok := d.get(sc, subj)
			if !ok || res.Ideal <= 0 {
				row = append(row, docsNone)
				continue
			}
			row = append(row, fmt.Sprintf("%.0f%% · %.2f ×", 100*float64(res.Admitted)/float64(res.Ideal), res.WorstWindow))
		}
		rows = append(rows, row)
	}
	return fmt.Sprintf("Each cell: admitted as a share of what an ideal limiter admits · the most admitted in any one "+
		"second, as a multiple of the rate. Limit %s.\n\n", d.limit(scenarioSteady)) +
		docsTable(header, rows) + d.errorNotes(subjects, scenarios...), nil
}

func docsPerformance(d docsResults) (string, error) {
	scenarios := []string{scenarioHotKey, scenarioManyKeys, scenarioLatency, scenarioMemory}
	if err := d.need(scenarios...); err != nil {
		return "", err
	}
	header := []string{"subject", "decisions/s, one hot key", "decisions/s, 10,000 keys", "one caller: p50 / p99 µs",
		"Redis calls per decision", "Redis server µs per decision", "bytes per key"}
	subjects := d.subjects(scenarios...)
	var rows [][]string
	for _, subj := range subjects {
		row := []string{subj}
		for _, sc := range []string{scenarioHotKey, scenarioManyKeys} {
			if res, ok := d.get(sc, subj); ok {
				row = append(row, docsRate(res.DecisionsPerSecond))
			} else {
				row = append(row, docsNone)
			}
		}
		if res, ok := d.get(scenarioLatency, subj); ok {
			row = append(row, outMicros(res.LatencyMicros.P50)+" / "+outMicros(res.LatencyMicros.P99))
		} else {
			row = append(row, docsNone)
		}
		if res, ok := d.get(scenarioHotKey, subj); ok && res.RedisCallsPerDecision >= 0 {
			row = append(row, docsCalls(res.RedisCallsPerDecision), docsMeasured(res.ServerMicrosPerDecision, outMicros, true))
		} else {
			row = append(row, docsNone, docsNone)
		}
		if res, ok := d.get(scenarioMemory, subj); ok && res.MemoryPerKey > 0 {
			row = append(row, docsFixed(res.MemoryPerKey, 0))
		} else {
			row = append(row, docsNone)
		}
		rows = append(rows, row)
	}
	for _, c := range d.ceilings {
		row := []string{"ceiling: " + c.Name, docsRate(c.RequestsPerSec) + " requests/s"}
		for len(row) < len(header) {
			row = append(row, "")
		}
		rows = append(rows, row)
	}
	return "Decisions per second at 128 goroutines, every request allowed; latency of one caller on one key; Redis " +
		"calls (as `INFO commandstats` counts them: a script and the commands it runs) and server time per " +
		"decision on the hot key; `used_memory` growth per key over 100,000 keys.\n\n" +
		docsTable(header, rows) + d.errorNotes(subjects, scenarios...), nil
}

func docsAlgorithmTable(d docsResults) (string, error) {
	if err := d.need(scenarioBurst, scenarioBoundary, scenarioPods, scenarioHotKey, scenarioManyKeys, scenarioMemory); err != nil {
		return "", err
	}
	header := []string{"measured"}
	for _, a := range docsAlgorithms {
		header = append(header, a.name)
	}
	type figure struct {
		label    string
		scenario string
		cell     func(Result) string
	}
	worst := func(r Result) string { return docsFixed(r.WorstWindow, 2) + " ×" }
	share := func(r Result) string {
		return fmt.Sprintf("%.0f%%", 100*float64(r.Admitted)/float64(max(r.Ideal, 1)))
	}
	figures := []figure{
		{"most admitted in one second after idle, × Rate (300 at once, then 200/s)", scenarioBurst, worst},
		{"most admitted in one second, boundary attack, × Rate", scenarioBoundary, worst},
		{"admitted of the ideal, pods 4 → 10 → 2", scenarioPods, share},
		{"decisions/s, one hot key, 128 goroutines", scenarioHotKey, func(r Result) string { return docsRate(r.DecisionsPerSecond) }},
		{"Redis server µs per decision, one hot key", scenarioHotKey, func(r Result) string { return docsMeasured(r.ServerMicrosPerDecision, outMicros, true) }},
		{"Redis server µs per decision, 10,000 keys", scenarioManyKeys, func(r Result) string { return docsMeasured(r.ServerMicrosPerDecision, outMicros, true) }},
		{"bytes per key, 100,000 keys", scenarioMemory, func(r Result) string { return docsMeasured(r.MemoryPerKey, docsBytes, false) }},
	}
	var rows [][]string
	var subjects []string
	for _, a := range docsAlgorithms {
		subjects = append(subjects, a.subject)
	}
	for _, f := range figures {
		row := []string{f.label}
		for _, a := range docsAlgorithms {
			if res, ok := d.get(f.scenario, a.subject); ok {
				row = append(row, f.cell(res))
			} else {
				row = append(row, docsNone)
			}
		}
		rows = append(rows, row)
	}
	return fmt.Sprintf("Limit %s in the first three rows; the throughput rows allow everything.\n\n", d.limit(scenarioBurst)) +
		docsTable(header, rows) + d.errorNotes(subjects, scenarioBurst, scenarioBoundary, scenarioPods, scenarioHotKey, scenarioManyKeys, scenarioMemory), nil
}

func docsScaling(d docsResults) (string, error) {
	if err := d.need(scenarioHotKey, scenarioManyKeys); err != nil {
		return "", err
	}
	header := []string{"subject", "decisions/s, one hot key", "Redis calls per decision", "decisions/s, 10,000 keys", "Redis calls per decision"}
	var rows [][]string
	for _, subj := range docsScalingSubjects {
		row := []string{subj}
		for _, sc := range []string{scenarioHotKey, scenarioManyKeys} {
			res, ok := d.get(sc, subj)
			switch {
			case !ok:
				row = append(row, docsNone, docsNone)
			case res.RedisCallsPerDecision < 0 && !d.remote[subj]:
				row = append(row, docsRate(res.DecisionsPerSecond), "none (in process)")
			default:
				row = append(row, docsRate(res.DecisionsPerSecond), docsMeasured(res.RedisCallsPerDecision, docsCalls, true))
			}
		}
		rows = append(rows, row)
	}
	return "128 goroutines, every request allowed. Redis calls are as `INFO commandstats` counts them (a script and " +
		"the commands it runs).\n\n" + docsTable(header, rows) + d.errorNotes(docsScalingSubjects, scenarioHotKey, scenarioManyKeys), nil
}

func docsServe(d docsResults) (string, error) {
	if err := d.need(scenarioServeOne, scenarioServeMany); err != nil {
		return "", err
	}
	header := []string{"subject", "1 caller: decisions/s", "1 caller: p50 / p99 µs", "1 caller: p50 over its direct call",
		"32 callers: decisions/s", "32 callers: µs per decision over its direct call", "Redis calls per decision", "Redis server µs per decision (32 callers)"}
	subjects := d.subjects(scenarioServeOne, scenarioServeMany)
	var rows [][]string
	for _, subj := range subjects {
		row := []string{subj}
		if res, ok := d.get(scenarioServeOne, subj); ok {
			over := ""
			if res.Overhead != nil {
				over = "+" + outMicros(res.Overhead.P50Micros) + " µs"
			}
			row = append(row, docsRate(res.DecisionsPerSecond), outMicros(res.LatencyMicros.P50)+" / "+outMicros(res.LatencyMicros.P99), over)
		} else {
			row = append(row, docsNone, docsNone, docsNone)
		}
		if res, ok := d.get(scenarioServeMany, subj); ok {
			over := ""
			if res.Overhead != nil {
				over = "+" + outMicros(res.Overhead.MicrosPerDecision) + " µs"
			}
			row = append(row, docsRate(res.DecisionsPerSecond), over, docsMeasured(res.RedisCallsPerDecision, docsCalls, true), docsMeasured(res.ServerMicrosPerDecision, outMicros, true))
		} else {
			row = append(row, docsNone, docsNone, docsNone, docsNone)
		}
		rows = append(rows, row)
	}
	return "1,000 user ids, every request allowed; all subjects on one Redis through the same go-redis client.\n\n" +
		docsTable(header, rows) + d.errorNotes(subjects, scenarioServeOne, scenarioServeMany), nil
}
