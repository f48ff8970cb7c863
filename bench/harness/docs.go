package harness

// This file renders the figure tables that README.md and docs/*.md quote
// from a Report, and rewrites them in place, so that every figure the docs
// quote comes from one saved run (bench/runs/full.json) and cannot drift
// from it: TestDocsQuoteTheCommittedRun fails when a block differs from
// what the JSON renders.
//
// A block in a Markdown file looks like
//
//	<!-- sluice bench: performance -->
//	...generated, never edited by hand...
//	<!-- end sluice bench -->
//
// and `sluice bench --docs DIR` (with a run, or --from-json) rewrites every
// block of DIR/README.md and DIR/docs/*.md.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

const (
	docsBlockStart = "<!-- sluice bench: "
	docsBlockEnd   = "<!-- end sluice bench -->"
)

// The scenarios the docs quote, by name.
const (
	scenarioSteady    = "steady under the limit (80/s against 100/s)"
	scenarioBurst     = "burst after idle (300 at once, then 200/s)"
	scenarioBoundary  = "fixed-window boundary attack (Rate just before and after a second)"
	scenarioPods      = "pods 4 -> 10 -> 2, each sending 50/s"
	scenarioSkewed    = "skewed tenants (4 hot keys at 300/s, 40 cold at 2/s)"
	scenarioHotKey    = "throughput: one hot key, 128 goroutines, all allowed"
	scenarioManyKeys  = "throughput: 10,000 keys, 128 goroutines, all allowed"
	scenarioLatency   = "latency: one caller, one key"
	scenarioMemory    = "memory: one decision on each of 100,000 keys"
	scenarioServeOne  = "serve: one caller, 1,000 keys, all allowed (sluice serve against a direct call)"
	scenarioServeMany = "serve: 32 callers, 1,000 keys, all allowed (sluice serve against a direct call)"
)

// docsAlgorithms are the five algorithms' subjects, in the docs' order.
var docsAlgorithms = []struct{ subject, name string }{
	{"sluice/tokenbucket", "Token bucket"},
	{"sluice/gcra", "GCRA"},
	{"sluice/fixedwindow", "Fixed window"},
	{"sluice/slidingcounter", "Sliding counter"},
	{"sluice/slidinglog", "Sliding log"},
}

// docsScalingSubjects are the rows of the scaling table: the token bucket
// alone, coalesced, leased, and x/time/rate as the in-process ceiling.
var docsScalingSubjects = []string{
	"sluice/tokenbucket",
	"sluice/tokenbucket (go-redis)",
	"sluice/tokenbucket+coalesce",
	"sluice/tokenbucket+coalesce (go-redis)",
	"sluice/tokenbucket+lease(B=100)",
	"x/time/rate (in process)",
}

// docsBlocks are the blocks the docs may quote, by name.
var docsBlocks = []struct {
	name   string
	render func(Report, docsResults) (string, error)
}{
	{"headline", func(r Report, _ docsResults) (string, error) { return docsHeadline(r) }},
	{"accuracy", func(_ Report, d docsResults) (string, error) { return docsAccuracy(d) }},
	{"performance", func(_ Report, d docsResults) (string, error) { return docsPerformance(d) }},
	{"algorithms", func(_ Report, d docsResults) (string, error) { return docsAlgorithmTable(d) }},
	{"scaling", func(_ Report, d docsResults) (string, error) { return docsScaling(d) }},
	{"serve", func(_ Report, d docsResults) (string, error) { return docsServe(d) }},
}

// DocFigures renders every block the docs may quote, by name, each saying
// it comes from jsonPath (slash-separated, relative to the repository's
// root). It fails if the report lacks a scenario a block needs (a run
// without --full).
func DocFigures(r Report, jsonPath string) (map[string]string, error) {
	idx := docsIndex(r)
	var errs []error
	out := map[string]string{}
	for _, block := range docsBlocks {
		name := block.name
		text, err := block.render(r, idx)
		if err != nil {
			errs = append(errs, fmt.Errorf("block %q: %w", name, err))
			continue
		}
		out[name] = docsSource(r, jsonPath) + "\n\n" + text
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// UpdateDocs rewrites every block of root/README.md and root/docs/*.md
// from r, saved as jsonFile (which must be inside root, so that the docs
// can name it). It checks every file before it writes any, so that an
// unknown block or a report without a needed scenario leaves every file
// as it was. It returns the files it changed.
func UpdateDocs(root string, r Report, jsonFile string) ([]string, error) {
	if !r.Full || !r.Representative {
		return nil, errors.New("the docs quote only a --full run on a real redis-server (--redis auto)")
	}
	files, err := DocFiles(root)
	if err != nil {
		return nil, err
	}
	rel, err := docsRelative(root, jsonFile)
	if err != nil {
		return nil, err
	}
	figures, err := DocFigures(r, rel)
	if err != nil {
		return nil, err
	}
	updated := map[string]string{}
	for _, f := range files {
		old, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		text, _, err := RewriteDocBlocks(string(old), figures)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if text != string(old) {
			updated[f] = text
		}
	}
	var changed []string
	for _, f := range files {
		text, ok := updated[f]
		if !ok {
			continue
		}
		if err := WriteFileAtomic(f, []byte(text)); err != nil {
			return changed, err
		}
		changed = append(changed, f)
	}
	return changed, nil
}

// CheckDocsTarget says whether UpdateDocs(root, r, jsonFile) could name
// jsonFile, find the docs and rewrite every block they hold (known names,
// well formed), so that a run can be refused before it starts rather
// than after.
func CheckDocsTarget(root, jsonFile string) error {
	files, err := DocFiles(root)
	if err != nil {
		return err
	}
	if _, err := docsRelative(root, jsonFile); err != nil {
		return err
	}
	placeholders := map[string]string{}
	for _, b := range docsBlocks {
		placeholders[b.name] = ""
	}
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if _, _, err := RewriteDocBlocks(string(text), placeholders); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return nil
}

// WriteFileAtomic writes data to a temporary file beside path and renames
// it over path, so that a failed write leaves path as it was.
func WriteFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// docsRelative is file's path from root, slash-separated; an error if
// file is not inside root.
func docsRelative(root, file string) (string, error) {
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	absFile, err := filepath.Abs(file)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(absRoot, absFile)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("the JSON %s is not inside %s: the docs could not name it", file, root)
	}
	return filepath.ToSlash(rel), nil
}

// DocFiles are the Markdown files whose blocks UpdateDocs rewrites:
// root/README.md and root/docs/*.md.
func DocFiles(root string) ([]string, error) {
	readme := filepath.Join(root, "README.md")
	if _, err := os.Stat(readme); err != nil {
		return nil, fmt.Errorf("--docs %s: not the repository's root: %w", root, err)
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	sort.Strings(docs)
	return append([]string{readme}, docs...), nil
}

// RewriteDocBlocks replaces the body of every block in text with its
// figures and returns the new text and the blocks' names, in order. An
// unknown name, a block left open or a block inside a block is an error.
func RewriteDocBlocks(text string, figures map[string]string) (string, []string, error) {
	var b strings.Builder
	var names []string
	rest := text
	for {
		i := strings.Index(rest, docsBlockStart)
		end := strings.Index(rest, docsBlockEnd)
		if i < 0 {
			if end >= 0 {
				return "", nil, fmt.Errorf("%q without a block to end", docsBlockEnd)
			}
			b.WriteString(rest)
			return b.String(), names, nil
		}
		if end >= 0 && end < i {
			return "", nil, fmt.Errorf("%q without a block to end", docsBlockEnd)
		}
		line, after, ok := strings.Cut(rest[i+len(docsBlockStart):], " -->\n")
		if !ok || strings.Contains(line, "\n") {
			return "", nil, errors.New("a block's first line must be <!-- sluice bench: NAME --> on a line of its own")
		}
		name := strings.TrimSpace(line)
		body, tail, ok := strings.Cut(after, docsBlockEnd)
		if !ok {
			return "", nil, fmt.Errorf("block %q is not ended by %q", name, docsBlockEnd)
		}
		if strings.Contains(body, docsBlockStart) {
			return "", nil, fmt.Errorf("block %q holds another block", name)
		}
		fig, ok := figures[name]
		if !ok {
			known := make([]string, 0, len(figures))
			for k := range figures {
				known = append(known, k)
			}
			sort.Strings(known)
			return "", nil, fmt.Errorf("unknown block %q (known: %s)", name, strings.Join(known, ", "))
		}
		names = append(names, name)
		b.WriteString(rest[:i])
		b.WriteString(docsBlockStart + name + " -->\n")
		b.WriteString(strings.TrimRight(fig, "\n") + "\n")
		b.WriteString(docsBlockEnd)
		rest = tail
	}
}

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
