package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/replay"
)

// A replay block of docs/choosing.md:
//
//	<!-- replay NAME: sluice replay ARGS -->
//	(the Markdown report of docs/choosing/NAME.json)
//	<!-- end replay -->
//
// docs/choosing/NAME.json is the output of `sluice replay ARGS --json -`
// run at the repository's root.
var replayBlock = regexp.MustCompile(`(?s)<!-- replay ([a-z0-9-]+): sluice replay ([^\n]*?) -->\n(.*?)<!-- end replay -->`)

// TestChoosingDocFigures holds every figure of docs/choosing.md: each
// replay block's command, run again on the shipped log, gives the
// committed JSON exactly, and the block is that JSON's Markdown report.
// SLUICE_UPDATE_DOCS=1 rewrites the JSON files and the blocks instead.
func TestChoosingDocFigures(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	doc, err := os.ReadFile(filepath.Join("docs", "choosing.md"))
	require.NoError(t, err)
	update := os.Getenv("SLUICE_UPDATE_DOCS") == "1"
	blocks := replayBlock.FindAllSubmatchIndex(doc, -1)
	require.GreaterOrEqual(t, len(blocks), 3, "replay blocks in docs/choosing.md")

	var rewritten bytes.Buffer
	last := 0
	for _, b := range blocks {
		name, args := string(doc[b[2]:b[3]]), strings.Fields(string(doc[b[4]:b[5]]))
		path := filepath.Join("docs", "choosing", name+".json")
		args = slices.DeleteFunc(args, func(a string) bool { return a == "--markdown" })
		code, out, stderr := replayCLI(t, "", append(args, "--json", "-", "--progress", "never")...)
		require.Equal(t, 0, code, "%s: %s", name, stderr)
		if update {
			require.NoError(t, os.WriteFile(path, []byte(out), 0o644))
		}
		committed, err := os.ReadFile(path)
		require.NoError(t, err, "run with SLUICE_UPDATE_DOCS=1 to write it")
		require.JSONEq(t, string(committed), out, "%s: the replay no longer gives the committed figures", name)

		var rep replay.Report
		require.NoError(t, json.Unmarshal(committed, &rep))
		var md bytes.Buffer
		require.NoError(t, replay.WriteMarkdown(&md, &rep))
		if !update {
			require.Equal(t, md.String(), string(doc[b[6]:b[7]]), "%s: the block differs from %s's report", name, path)
		}
		rewritten.Write(doc[last:b[6]])
		rewritten.Write(md.Bytes())
		last = b[7]
	}
	rewritten.Write(doc[last:])
	if update {
		require.NoError(t, os.WriteFile(filepath.Join("docs", "choosing.md"), rewritten.Bytes(), 0o644))
	}
}
