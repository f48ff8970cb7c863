package replay

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/replay/accesslog"
)

const hostileKey = `<script>alert(1)</script>`

// htmlLog is three minutes of traffic to two policies: steady clients
// within the limit, clients (one named like a script) bursting 20
// requests in 200 ms every 20 s, 1/s on average, a client at 10/s
// throughout, and logins, some of them in bursts.
func htmlLog() []accesslog.Record {
	rng := rand.New(rand.NewPCG(1, 2))
	var recs []accesslog.Record
	add := func(key, method, path string, ms int) {
		recs = append(recs, accesslog.Record{Time: t0.Add(time.Duration(ms) * time.Millisecond), Key: key, Method: method, Path: path})
	}
	const span = 180_000
	for k := range 8 {
		for ms := rng.IntN(500); ms < span; ms += 250 + rng.IntN(500) {
			add(fmt.Sprint("client-", k), "GET", "/api/items", ms)
		}
	}
	for k, key := range []string{"burst-a", "burst-b", hostileKey} {
		for start := 1000 * k; start < span; start += 20_000 {
			for i := range 20 {
				add(key, "GET", "/api/items", start+10*i)
			}
		}
	}
	for ms := 0; ms < span; ms += 100 {
		add("heavy", "GET", "/api/search", ms)
	}
	for k := range 5 {
		for ms := 5000 * k; ms < span; ms += 20_000 {
			add(fmt.Sprint("user-", k), "POST", "/login", ms)
		}
	}
	for start := 0; start < span; start += 60_000 {
		for i := range 15 {
			add("guesser", "POST", "/login", start+200*i)
		}
	}
	slices.SortStableFunc(recs, func(a, b accesslog.Record) int { return a.Time.Compare(b.Time) })
	return recs
}

// htmlReport replays htmlLog under two policies with a target of 5%.
func htmlReport(t *testing.T) *Report {
	t.Helper()
	rep, err := Run(context.Background(), &records{recs: htmlLog()}, Config{Target: 0.05, Policies: []Policy{
		{Name: "api", Routes: []string{"/api/"}, Limit: sluice.PerSecond(5)},
		{Name: "login", Routes: []string{"POST /login"}, Algorithm: "fixedwindow", Limit: sluice.PerMinute(10)},
	}})
	require.NoError(t, err)
	for _, g := range byPolicy(rep.Results) {
		require.NotZero(t, g[0].Denied, "policy %s denies some of the log", g[0].Policy)
	}
	return rep
}

// chartCount is what the charts of one class hold.
type chartCount struct{ charts, polylines, rects int }

// htmlDoc is the structure of a page that the tests check.
type htmlDoc struct {
	sections  []string
	charts    map[string]*chartCount            // by class
	bySection map[string]map[string]*chartCount // section, class
	elements  map[string]int                    // every element by name
	texts     []string                          // character data, outside <style>
	rows      map[string][][]string             // the cells of each section's table rows
	summary   map[string]string                 // the input summary, <dt> to <dd>
	ticks     map[string][]string               // x axis labels by chart class
	points    []int                             // points of each polyline of a timeline
}

// parseHTML reads a page (WriteHTML's, or the DOM a browser dumped) with
// the standard library's XML decoder in its lenient mode, which reads
// HTML's void elements and entities.
func parseHTML(t *testing.T, page []byte) htmlDoc {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(page))
	d.Strict, d.AutoClose, d.Entity = false, xml.HTMLAutoClose, xml.HTMLEntity
	doc := htmlDoc{charts: map[string]*chartCount{}, bySection: map[string]map[string]*chartCount{}, elements: map[string]int{},
		rows: map[string][][]string{}, summary: map[string]string{}, ticks: map[string][]string{}}
	attr := func(e xml.StartElement, name string) string {
		for _, a := range e.Attr {
			if a.Name.Local == name {
				return a.Value
			}
		}
		return ""
	}
	var section, class, capture, dt string
	var chart, inSection *chartCount
	var text strings.Builder
	inStyle := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		switch e := tok.(type) {
		case xml.StartElement:
			name := strings.ToLower(e.Name.Local)
			doc.elements[name]++
			switch name {
			case "style":
				inStyle = true
			case "section":
				section = attr(e, "id")
				doc.sections = append(doc.sections, section)
				doc.bySection[section] = map[string]*chartCount{}
			case "svg":
				if class = attr(e, "class"); strings.HasPrefix(class, "chart") {
					if doc.charts[class] == nil {
						doc.charts[class] = &chartCount{}
					}
					chart = doc.charts[class]
					chart.charts++
					if section != "" {
						if doc.bySection[section][class] == nil {
							doc.bySection[section][class] = &chartCount{}
						}
						inSection = doc.bySection[section][class]
						inSection.charts++
					}
				}
			case "polyline", "rect":
				for _, c := range []*chartCount{chart, inSection} {
					if c != nil && name == "polyline" {
						c.polylines++
					} else if c != nil {
						c.rects++
					}
				}
				if name == "polyline" && class == "chart timeline" {
					doc.points = append(doc.points, len(strings.Fields(attr(e, "points"))))
				}
			case "tr":
				if section != "" {
					doc.rows[section] = append(doc.rows[section], nil)
				}
			case "td", "dt", "dd":
				capture = name
				text.Reset()
			case "text":
				if chart != nil && attr(e, "class") == "tick" {
					capture = "tick"
					text.Reset()
				}
			}
		case xml.EndElement:
			name := strings.ToLower(e.Name.Local)
			switch {
			case name == "style":
				inStyle = false
			case name == "section":
				section = ""
			case name == "svg":
				chart, inSection, class = nil, nil, ""
			case name == capture || name == "text" && capture == "tick":
				switch s := strings.TrimSpace(text.String()); capture {
				case "td":
					if rows := doc.rows[section]; len(rows) > 0 {
						rows[len(rows)-1] = append(rows[len(rows)-1], s)
					}
				case "dt":
					dt = s
				case "dd":
					doc.summary[dt] = s
				case "tick":
					doc.ticks[class] = append(doc.ticks[class], s)
				}
				capture = ""
			}
		case xml.CharData:
			if !inStyle {
				doc.texts = append(doc.texts, string(e))
			}
			if capture != "" {
				text.Write(e)
			}
		}
	}
	return doc
}

func writeHTML(t *testing.T, rep *Report) []byte {
	t.Helper()
	var page bytes.Buffer
	require.NoError(t, WriteHTML(&page, rep))
	return page.Bytes()
}

// wantCharts is the charts WriteHTML documents for group, by class.
func wantCharts(group []Result, target bool) map[string]chartCount {
	want := map[string]chartCount{"chart timeline": {}, "chart keys": {}}
	tl, keys, ladder := want["chart timeline"], want["chart keys"], chartCount{}
	for _, r := range group {
		tl.charts++
		if len(r.Timeline.Allowed) > 0 {
			tl.polylines += 2
		}
		if len(r.TopKeys) > 0 {
			keys.charts++
			keys.rects += len(r.TopKeys)
		}
		if r.Target != nil && len(r.Target.Ladder) > 0 {
			ladder.charts, ladder.polylines = 1, ladder.polylines+1
		}
	}
	want["chart timeline"], want["chart keys"] = tl, keys
	if target && ladder.charts > 0 {
		want["chart ladder"] = ladder
	}
	return want
}

func gotCharts(m map[string]*chartCount) map[string]chartCount {
	got := map[string]chartCount{}
	for class, c := range m {
		got[class] = *c
	}
	for _, class := range []string{"chart timeline", "chart keys"} {
		if _, ok := got[class]; !ok {
			got[class] = chartCount{} // WriteHTML's zero
		}
	}
	return got
}

func TestHTMLChartsPerPolicyAndAlgorithm(t *testing.T) {
	rep := htmlReport(t)
	doc := parseHTML(t, writeHTML(t, rep))
	groups := byPolicy(rep.Results)
	require.Equal(t, []string{"policy-1", "policy-2"}, doc.sections)
	for i, group := range groups {
		id := fmt.Sprint("policy-", i+1)
		want := wantCharts(group, true)
		require.Equal(t, want, gotCharts(doc.bySection[id]), "section %s: charts, polylines, rects by class", id)
		require.Equal(t, chartCount{charts: len(group), polylines: 2 * len(group)}, want["chart timeline"], "two lines per algorithm")
		require.Equal(t, chartCount{charts: 1, polylines: len(group)}, want["chart ladder"], "one ladder line per algorithm")
		require.NotZero(t, want["chart keys"].rects)

		// The table mirrors WriteText's, row by row.
		require.Len(t, doc.rows[id], 1+len(group), "a header row and a row per algorithm")
		for j, r := range group {
			name := r.Algorithm
			if r.Own {
				name += " *"
			}
			require.Equal(t, []string{name, num(r.Requests), num(r.Allowed), num(r.Denied), pct(r.Denied, r.Requests), num(r.Keys),
				num(r.DeniedKeys), num(r.WellBehavedKeys), num(r.WellBehavedDenials), ratio(r.Worst.Admitted, r.Worst.Rate)}, doc.rows[id][j+1])
		}
	}
	// Every step of a timeline is a horizontal segment: two points.
	require.Len(t, doc.points, 2*len(rep.Results))
	for i, n := range doc.points {
		require.Equal(t, 2*len(rep.Results[i/2].Timeline.Allowed), n)
	}
	// Three minutes from 12:00 UTC, labelled by the minute.
	require.Subset(t, doc.ticks["chart timeline"], []string{"12:00", "12:01", "12:02", "12:03"})
	require.Subset(t, doc.ticks["chart ladder"], []string{"1/16×", "1×", "16×"})
	page := strings.Join(doc.texts, "")
	require.Contains(t, page, "Smallest limit denying at most 5% of keys")
	for _, r := range rep.Results {
		require.NotNil(t, r.Target)
		if r.Target.Limit != nil {
			require.Contains(t, page, r.Algorithm+": "+limitText(*r.Target.Limit))
		}
	}
	require.Equal(t, "2026-11-24 12:00:00 to 2026-11-24 12:02:59 UTC ("+rep.Input.Last.Sub(t0).String()+")", doc.summary["Span"])
	require.Equal(t, num(rep.Input.Records), doc.summary["Records"])
}

func TestHTMLEscapesKeysNamesAndReasons(t *testing.T) {
	name := `<b>"&'</b>`
	var recs []accesslog.Record
	for i := range 10 {
		recs = append(recs, at(hostileKey, i))
	}
	rep, err := Run(context.Background(), &records{recs: recs}, Config{Policies: []Policy{{Name: name, Limit: sluice.PerSecond(3)}}})
	require.NoError(t, err)
	rep.Input.Skipped, rep.Input.SkippedLines = 1, []accesslog.LineError{{Line: 3, Reason: `<img src=x onerror=alert(2)>`}}
	raw := writeHTML(t, rep)

	lower := strings.ToLower(string(raw))
	for _, s := range []string{"<script", "<img", "<b>"} {
		require.NotContains(t, lower, s, "no %s element", s)
	}
	require.Contains(t, string(raw), "&lt;script&gt;alert(1)&lt;/script&gt;")
	doc := parseHTML(t, raw)
	require.Zero(t, doc.elements["script"]+doc.elements["img"]+doc.elements["b"])
	text := strings.Join(doc.texts, "")
	require.Contains(t, text, hostileKey, "the key is shown as text")
	require.Contains(t, text, "Policy "+name)
	require.Contains(t, text, "line 3: <img src=x onerror=alert(2)>")
	require.Equal(t, len(rep.Results), doc.charts["chart keys"].charts, "every algorithm denied the key")
}

func TestHTMLOfAnEmptyReport(t *testing.T) {
	rep, err := Run(context.Background(), &records{}, Config{Target: 0.1, Policies: []Policy{{Name: "p", Limit: sluice.PerSecond(3)}}})
	require.NoError(t, err)
	raw := writeHTML(t, rep)
	for _, s := range []string{"NaN", "Inf"} {
		require.NotContains(t, string(raw), s)
	}
	doc := parseHTML(t, raw)
	require.Equal(t, wantCharts(rep.Results, true), gotCharts(doc.charts))
	require.Equal(t, chartCount{charts: len(rep.Results)}, *doc.charts["chart timeline"], "a chart without lines per algorithm")
	require.Equal(t, len(rep.Results), strings.Count(strings.Join(doc.texts, "|"), "no requests"))
	require.Equal(t, "-", doc.rows["policy-1"][1][4], "denied % of no requests")
	require.Equal(t, "-", doc.summary["Span"])
	require.Equal(t, len(rep.Results), strings.Count(strings.Join(doc.texts, "|"), "No key denied."))

	// A report of nothing at all.
	doc = parseHTML(t, writeHTML(t, &Report{}))
	require.Empty(t, doc.sections)
	require.Contains(t, strings.Join(doc.texts, ""), "No results.")
	require.Error(t, WriteHTML(io.Discard, nil))
}

func TestHTMLInputSummary(t *testing.T) {
	rep := &Report{Input: Input{Format: "combined", Records: 12345, Skipped: 9, OutOfOrder: 4, Unmatched: 7,
		First: t0, Last: t0.Add(90 * time.Minute)}}
	for i := range 8 {
		rep.Input.SkippedLines = append(rep.Input.SkippedLines, accesslog.LineError{Line: int64(10 * (i + 1)), Reason: "no time"})
	}
	doc := parseHTML(t, writeHTML(t, rep))
	require.Equal(t, "12,345 (combined)", doc.summary["Records"])
	require.Equal(t, "2026-11-24 12:00:00 to 2026-11-24 13:30:00 UTC (1h30m0s)", doc.summary["Span"])
	require.Equal(t, "9", doc.summary["Skipped lines"])
	require.True(t, strings.HasPrefix(doc.summary["Out of order"], "4 "))
	require.True(t, strings.HasPrefix(doc.summary["Unmatched"], "7 "))
	text := strings.Join(doc.texts, "")
	for i := range maxHTMLSkipped {
		require.Contains(t, text, fmt.Sprintf("line %d: no time", 10*(i+1)))
	}
	require.NotContains(t, text, fmt.Sprintf("line %d:", 10*(maxHTMLSkipped+1)), "only the first few")
	require.Contains(t, text, "the JSON report lists the first 8")
}

func TestHTMLIsSelfContained(t *testing.T) {
	raw := writeHTML(t, htmlReport(t))
	doc := parseHTML(t, raw)
	for _, e := range []string{"script", "link", "img", "iframe", "object", "embed", "image", "use", "foreignobject"} {
		require.Zero(t, doc.elements[e], "no <%s>", e)
	}
	for _, s := range []string{"http:", "https:", "//", "url(", "@import", "@font-face", "src=", "href=\"/", "xlink"} {
		require.NotContains(t, strings.ReplaceAll(string(raw), "</", ""), s)
	}
	require.NotZero(t, doc.elements["svg"])
}

type failingWriter struct{ writes int }

func (f *failingWriter) Write(p []byte) (int, error) { f.writes++; return 0, errors.New("disk full") }

func TestHTMLRendersThenWritesOnce(t *testing.T) {
	w := &failingWriter{}
	require.EqualError(t, WriteHTML(w, htmlReport(t)), "disk full")
	require.Equal(t, 1, w.writes, "the page in one write")
}
