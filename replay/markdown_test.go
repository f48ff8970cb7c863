package replay

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/replay/accesslog"
)

func TestMarkdownKeepsHostileKeysInTheirCell(t *testing.T) {
	rep, _ := decisions(t, Config{Policies: []Policy{{Name: "p", Limit: sluice.PerSecond(1)}}, Algorithms: []string{"fixedwindow"}, Target: 0.5},
		at("a|b`c\nd", 0), at("a|b`c\nd", 1), at("ok", 2))
	var md bytes.Buffer
	require.NoError(t, WriteMarkdown(&md, rep))
	out := md.String()
	require.Contains(t, out, "`a\\|b'c d` (1 of 2 denied)")
	require.Contains(t, out, "| fixedwindow | 1 (33.33%) | 1 of 2 | 0 (0) | 1 / 1 = 1.00x | 1 per 1s, burst 1 |")
	require.Contains(t, out, "smallest limit denying at most 50% of keys")

	// An empty report still writes its header.
	rep, _ = decisions(t, Config{Policies: []Policy{{Name: "p", Limit: sluice.PerSecond(1)}}, Algorithms: []string{"fixedwindow"}}, []accesslog.Record{}...)
	md.Reset()
	require.NoError(t, WriteMarkdown(&md, rep))
	require.Contains(t, md.String(), "| fixedwindow | 0 | 0 of 0 | 0 (0) | 0 / 1 = 0.00x |")
}
