package harness

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// committedRun is the run every figure in the docs comes from.
const committedRun = "bench/runs/full.json"

func loadCommittedRun(t *testing.T) Report {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", committedRun))
	require.NoError(t, err)
	var r Report
	require.NoError(t, json.Unmarshal(data, &r))
	require.True(t, r.Full, "%s must be a --full run", committedRun)
	return r
}

// TestDocsQuoteTheCommittedRun: every figure block in README.md and
// docs/*.md is exactly what bench/runs/full.json renders, so a figure
// cannot drift from the run it names; after a new run,
// `go run ./bench/cmd/sluice-bench --from-json bench/runs/full.json --docs .`
// (or the run itself with --docs ., through bench/run.sh) rewrites them.
func TestDocsQuoteTheCommittedRun(t *testing.T) {
	r := loadCommittedRun(t)
	figures, err := DocFigures(r, committedRun)
	require.NoError(t, err)
	files, err := DocFiles(filepath.Join("..", ".."))
	require.NoError(t, err)
	quoted := map[string][]string{}
	for _, f := range files {
		old, err := os.ReadFile(f)
		require.NoError(t, err)
		text, names, err := RewriteDocBlocks(string(old), figures)
		require.NoError(t, err, f)
		if text != string(old) {
			want, got := strings.Split(text, "\n"), strings.Split(string(old), "\n")
			for i := 0; i < max(len(want), len(got)); i++ {
				w, g := "", ""
				if i < len(want) {
					w = want[i]
				}
				if i < len(got) {
					g = got[i]
				}
				if w != g {
					t.Fatalf("%s:%d quotes figures that %s does not render:\n  has:     %s\n  renders: %s\nrun go run ./bench/cmd/sluice-bench --from-json %s --docs .", f, i+1, committedRun, g, w, committedRun)
				}
			}
		}
		for _, n := range names {
			quoted[n] = append(quoted[n], filepath.Base(f))
		}
	}
	for name := range figures {
		require.NotEmpty(t, quoted[name], "no doc quotes the block %q", name)
	}
	require.Contains(t, quoted["headline"], "README.md")
}

// TestRunScriptRunsTheDocsCommand: bench/run.sh, which docs/benchmarks.md
// gives for the committed run, ends by running the command the blocks
// name, with the flags given, after it builds sluice-serve onto the PATH
// and installs envoyproxy/ratelimit where sluice-bench looks for it.
func TestRunScriptRunsTheDocsCommand(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "run.sh"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.Equal(t, `PATH="$bin:$PATH" `+docsCommand+` "$@"`, lines[len(lines)-1])
	require.Contains(t, lines, `go build -o "$bin/sluice-serve" ./serve/cmd/sluice-serve`)
	require.Contains(t, lines, "go run ./internal/envoyrl/install >/dev/null")
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "benchmarks.md"))
	require.NoError(t, err)
	require.Contains(t, strings.Join(strings.Fields(string(doc)), " "),
		"`bench/run.sh --full --redis auto --json "+committedRun+" --html bench/runs/full.html --docs .` runs everything")
	fi, err := os.Stat(filepath.Join("..", "run.sh"))
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&0o111, "bench/run.sh is executable")
}

func TestRewriteDocBlocks(t *testing.T) {
	figures := map[string]string{"a": "table A\n", "b": "table B"}
	got, names, err := RewriteDocBlocks("x\n<!-- sluice bench: a -->\nold\n<!-- end sluice bench -->\ny\n<!-- sluice bench: b -->\n<!-- end sluice bench -->\n", figures)
	require.NoError(t, err)
	require.Equal(t, "x\n<!-- sluice bench: a -->\ntable A\n<!-- end sluice bench -->\ny\n<!-- sluice bench: b -->\ntable B\n<!-- end sluice bench -->\n", got)
	require.Equal(t, []string{"a", "b"}, names)

	same, names, err := RewriteDocBlocks("no blocks here\n", figures)
	require.NoError(t, err)
	require.Equal(t, "no blocks here\n", same)
	require.Empty(t, names)

	for text, want := range map[string]string{
		"<!-- sluice bench: c -->\n<!-- end sluice bench -->\n":                            `unknown block "c" (known: a, b)`,
		"<!-- sluice bench: a -->\nnever ended\n":                                          `block "a" is not ended`,
		"<!-- end sluice bench -->\n":                                                      "without a block to end",
		"<!-- sluice bench: a -->\n<!-- sluice bench: b -->\n<!-- end sluice bench -->\n":  `block "a" holds another block`,
		"<!-- sluice bench: a --> trailing\n<!-- end sluice bench -->\n":                   "on a line of its own",
		"<!-- sluice bench: a -->\n<!-- end sluice bench -->\n<!-- end sluice bench -->\n": "without a block to end",
	} {
		_, _, err := RewriteDocBlocks(text, figures)
		require.ErrorContains(t, err, want, text)
	}
}

// TestUpdateDocs: blocks are rewritten in place; a bad block in one file,
// or a report without the scenarios a block needs, leaves every file as
// it was.
func TestUpdateDocs(t *testing.T) {
	r := loadCommittedRun(t)
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "docs"), 0o755))
	jsonFile := filepath.Join(root, "bench", "runs", "full.json")
	readme := "# R\n<!-- sluice bench: headline -->\nstale\n<!-- end sluice bench -->\n"
	perf := "<!-- sluice bench: performance -->\n<!-- end sluice bench -->\n"
	write := func(name, text string) {
		require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte(text), 0o644))
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(root, name))
		require.NoError(t, err)
		return string(b)
	}
	write("README.md", readme)
	write("docs/a.md", perf)

	changed, err := UpdateDocs(root, r, jsonFile)
	require.NoError(t, err)
	require.Len(t, changed, 2)
	require.Contains(t, read("README.md"), "From `bench/runs/full.json`")
	require.NotContains(t, read("README.md"), "stale")
	require.Contains(t, read("docs/a.md"), "| sluice/tokenbucket |")

	// A second file with an unknown block: nothing is written.
	write("README.md", readme)
	write("docs/b.md", "<!-- sluice bench: nonsense -->\n<!-- end sluice bench -->\n")
	_, err = UpdateDocs(root, r, jsonFile)
	require.ErrorContains(t, err, `unknown block "nonsense"`)
	require.Equal(t, readme, read("README.md"))

	// A quick run lacks the accuracy scenarios.
	require.NoError(t, os.Remove(filepath.Join(root, "docs", "b.md")))
	quick := r
	quick.Results = nil
	for _, res := range r.Results {
		if strings.HasPrefix(res.Scenario, "throughput:") {
			quick.Results = append(quick.Results, res)
		}
	}
	_, err = UpdateDocs(root, quick, jsonFile)
	require.ErrorContains(t, err, "run sluice bench --full")
	require.Equal(t, readme, read("README.md"))

	// Only a full run on a real Redis.
	embeddedRun := r
	embeddedRun.Representative = false
	_, err = UpdateDocs(root, embeddedRun, jsonFile)
	require.ErrorContains(t, err, "only a --full run on a real redis-server")
	require.Equal(t, readme, read("README.md"))

	// The docs must be able to name the JSON.
	_, err = UpdateDocs(root, r, filepath.Join(t.TempDir(), "elsewhere.json"))
	require.ErrorContains(t, err, "is not inside")
	_, err = UpdateDocs(t.TempDir(), r, jsonFile)
	require.ErrorContains(t, err, "not the repository's root")
}

// TestCommittedReportIsTheRunsHTML: bench/runs/full.html, which the docs
// link, is what WriteHTML renders from bench/runs/full.json.
func TestCommittedReportIsTheRunsHTML(t *testing.T) {
	r := loadCommittedRun(t)
	committed, err := os.ReadFile(filepath.Join("..", "runs", "full.html"))
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, WriteHTML(&b, r))
	require.True(t, b.String() == string(committed),
		"bench/runs/full.html is not what full.json renders: go run ./bench/cmd/sluice-bench --from-json bench/runs/full.json --html bench/runs/full.html")
}

// TestCheckDocsTarget: a run with --docs is refused before it starts when
// a doc holds a block that could not be rewritten.
func TestCheckDocsTarget(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "docs"), 0o755))
	jsonFile := filepath.Join(root, "run.json")
	require.NoError(t, os.WriteFile(filepath.Join(root, "README.md"), []byte("<!-- sluice bench: headline -->\n<!-- end sluice bench -->\n"), 0o644))
	require.NoError(t, CheckDocsTarget(root, jsonFile))
	require.NoError(t, os.WriteFile(filepath.Join(root, "docs", "a.md"), []byte("<!-- sluice bench: headline -->\nnever ended\n"), 0o644))
	require.ErrorContains(t, CheckDocsTarget(root, jsonFile), "is not ended")
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))
	require.NoError(t, WriteFileAtomic(path, []byte("new")))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "new", string(got))
	require.Error(t, WriteFileAtomic(filepath.Join(dir, "missing", "f"), []byte("x")))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left behind")
}
