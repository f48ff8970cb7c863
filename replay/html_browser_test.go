//go:build unix

package replay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/browsertest"
)

// TestReplayHTMLRendersInHeadlessChromium opens the page of a replay of two
// policies in a real browser: the DOM Chromium builds holds every chart
// WriteHTML wrote, with its lines and bars, and the hostile key as text,
// not a script; a screenshot shows the charts painted in the bench
// report's colours (#4e79a7, what was allowed; #e15759, what was denied).
func TestReplayHTMLRendersInHeadlessChromium(t *testing.T) {
	browser := browsertest.Require(t)
	rep := htmlReport(t)
	page := writeHTML(t, rep)
	dir := t.TempDir()
	path := filepath.Join(dir, "replay.html")
	require.NoError(t, os.WriteFile(path, page, 0o644))
	url := "file://" + path
	written := parseHTML(t, page)

	dom, stderr, err := browsertest.Run(t, browser, "--dump-dom", url)
	if err != nil || len(dom) == 0 {
		t.Fatalf("%s --dump-dom: %v, %d bytes of DOM; stderr:\n%s", browser, err, len(dom), stderr)
	}
	rendered := parseHTML(t, dom)
	require.Equal(t, written.sections, rendered.sections)
	require.Equal(t, []string{"policy-1", "policy-2"}, rendered.sections)
	require.Equal(t, gotCharts(written.charts), gotCharts(rendered.charts), "charts, polylines and rects by class")
	for i, group := range byPolicy(rep.Results) {
		id := "policy-" + string(rune('1'+i))
		require.Equal(t, wantCharts(group, true), gotCharts(rendered.bySection[id]), "section %s", id)
	}
	require.Zero(t, rendered.elements["script"])
	require.Contains(t, strings.Join(rendered.texts, ""), hostileKey)
	tl, keys, ladder := rendered.charts["chart timeline"], rendered.charts["chart keys"], rendered.charts["chart ladder"]
	t.Logf("rendered DOM: %d timeline charts with %d polylines, %d keys charts with %d rects, %d ladder charts with %d polylines",
		tl.charts, tl.polylines, keys.charts, keys.rects, ladder.charts, ladder.polylines)

	img := browsertest.Screenshot(t, browser, url, 1200, 2000)
	b := img.Bounds()
	var allowed, denied int
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			switch c := img.At(x, y); {
			case browsertest.Near(c, 0x4e79a7):
				allowed++
			case browsertest.Near(c, 0xe15759):
				denied++
			}
		}
	}
	t.Logf("screenshot %dx%d: %d pixels of #4e79a7, %d of #e15759", b.Dx(), b.Dy(), allowed, denied)
	if allowed == 0 || denied == 0 {
		t.Fatalf("screenshot without the charts' colours: %d pixels of #4e79a7, %d of #e15759 (want both > 0)", allowed, denied)
	}
}
