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
	"sort"
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
