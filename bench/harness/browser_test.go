//go:build unix

package harness

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/sluicehq/sluice/internal/browsertest"
)

// browserChartCount is what a page's inline SVG charts hold: per class
// ("chart admitted", "chart bars"), the charts, their polylines and rects.
type browserChartCount struct {
	charts, polylines, rects int
}

// browserPage is the structure of an HTML page that matters here: the
// charts by class, the headline section's bars charts, and the charts of
// each section by id.
type browserPage struct {
	svgs       int // every <svg> element
	byClass    map[string]*browserChartCount
	headline   bool
	headBars   int
	sectionSVG map[string]int
}

// browserParse parses HTML (the page WriteHTML wrote or the DOM Chromium
// dumped) with the HTML5 parser and counts its charts.
func browserParse(t *testing.T, page []byte) browserPage {
	t.Helper()
	doc, err := html.Parse(bytes.NewReader(page))
	require.NoError(t, err)
	p := browserPage{byClass: map[string]*browserChartCount{}, sectionSVG: map[string]int{}}
	attr := func(n *html.Node, key string) string {
		for _, a := range n.Attr {
			if a.Key == key {
				return a.Val
			}
		}
		return ""
	}
	var walk func(n *html.Node, section string, chart *browserChartCount)
	walk = func(n *html.Node, section string, chart *browserChartCount) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "section":
				section = attr(n, "id")
				if section == "headline" {
					p.headline = true
				}
			case "svg":
				p.svgs++
				class := attr(n, "class")
				if strings.HasPrefix(class, "chart") {
					c := p.byClass[class]
					if c == nil {
						c = &browserChartCount{}
						p.byClass[class] = c
					}
					c.charts++
					chart = c
					p.sectionSVG[section]++
					if section == "headline" && class == "chart bars" {
						p.headBars++
					}
				}
			case "polyline":
				if chart != nil {
					chart.polylines++
				}
			case "rect":
				if chart != nil {
					chart.rects++
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, section, chart)
		}
	}
	walk(doc, "", nil)
	return p
}

// TestHTMLReportRendersInHeadlessChromium opens the committed run's HTML
// report in a real browser: the DOM Chromium builds holds every chart
// WriteHTML wrote, and a screenshot shows them painted (the first
// palette colour, #4e79a7, is on screen), not a blank page.
func TestHTMLReportRendersInHeadlessChromium(t *testing.T) {
	browser := browsertest.Require(t)

	raw, err := os.ReadFile(filepath.Join("..", "runs", "full.json"))
	require.NoError(t, err)
	var r Report
	require.NoError(t, json.Unmarshal(raw, &r))
	require.NotEmpty(t, r.Results)
	scenarios := len(outGroupByScenario(r.Results))
	headlines := len(HeadlineOf(r))
	require.NotZero(t, headlines, "the committed run has throughput scenarios")

	var page bytes.Buffer
	require.NoError(t, WriteHTML(&page, r))
	dir := t.TempDir()
	path := filepath.Join(dir, "report.html")
	require.NoError(t, os.WriteFile(path, page.Bytes(), 0o644))
	url := "file://" + path

	written := browserParse(t, page.Bytes())
	require.GreaterOrEqual(t, written.svgs, scenarios+headlines)

	// The DOM after rendering.
	dom, stderr, err := browsertest.Run(t, browser, "--dump-dom", url)
	if err != nil || len(dom) == 0 {
		t.Fatalf("%s --dump-dom: %v, %d bytes of DOM; stderr:\n%s", browser, err, len(dom), stderr)
	}
	rendered := browserParse(t, dom)
	require.True(t, rendered.headline, `<section id="headline"> in the rendered DOM`)
	require.Equal(t, written.svgs, rendered.svgs, "every <svg> WriteHTML wrote is in the rendered DOM")
	require.GreaterOrEqual(t, rendered.svgs, scenarios+headlines)
	require.Equal(t, headlines, rendered.headBars, "one bars chart per headline scenario")
	for class, w := range written.byClass {
		got := rendered.byClass[class]
		require.NotNil(t, got, "class %q", class)
		require.Equal(t, *w, *got, "charts of class %q: charts, polylines, rects", class)
	}
	admitted, bars := rendered.byClass["chart admitted"], rendered.byClass["chart bars"]
	require.NotNil(t, admitted)
	require.NotNil(t, bars)
	require.Equal(t, scenarios, admitted.charts, "one admitted-over-time chart per scenario")
	require.GreaterOrEqual(t, admitted.polylines, scenarios, "lines drawn in the admitted charts")
	require.GreaterOrEqual(t, bars.rects, bars.charts, "bars drawn in the bars charts")
	for i := 1; i <= scenarios; i++ {
		require.GreaterOrEqual(t, rendered.sectionSVG["scenario-"+strconv.Itoa(i)], 1, "section scenario-%d has a chart", i)
	}
	t.Logf("rendered DOM: %d charts (%d headline, %d admitted with %d polylines, %d bars with %d rects) for %d scenarios",
		rendered.svgs, rendered.headBars, admitted.charts, admitted.polylines, bars.charts, bars.rects, scenarios)

	// The pixels.
	img := browsertest.Screenshot(t, browser, url, 1200, 2000)
	b := img.Bounds()

	colours := map[[3]uint8]bool{}
	palette := 0 // pixels within ±3 per channel of #4e79a7
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			colours[[3]uint8{uint8(cr >> 8), uint8(cg >> 8), uint8(cb >> 8)}] = true
			if browsertest.Near(img.At(x, y), 0x4e79a7) {
				palette++
			}
		}
	}
	t.Logf("screenshot %dx%d: %d distinct colours in the sample, %d sampled pixels of #4e79a7", b.Dx(), b.Dy(), len(colours), palette)
	if len(colours) < 8 || palette == 0 {
		t.Fatalf("screenshot looks blank or chartless: %d distinct colours (want >= 8), %d pixels of #4e79a7 (want > 0)",
			len(colours), palette)
	}
}
