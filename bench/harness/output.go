package harness

// This file renders a Report: as an aligned text table, as indented JSON
// and as one self-contained HTML page whose charts are inline SVG drawn
// here, so the page needs nothing from the network to be viewed.
//
// Every unexported name in this file starts with "out" so it cannot clash
// with the rest of the package.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// outNotRepresentative is the warning shown when Report.Representative is
// false.
const outNotRepresentative = "latencies from the embedded store are NOT representative of a real Redis"

// outPalette colours subjects, in order of first appearance in a report,
// so a subject keeps its colour in every scenario's chart.
var outPalette = []string{
	"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
	"#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
}

const (
	outIdealColour = "#222222"
	outP50Colour   = "#4e79a7"
	outP99Colour   = "#e15759"
)

// outColumns are the columns of a scenario's table, text and HTML alike.
var outColumns = []string{
	"subject", "admitted", "ideal", "admitted/ideal", "worst window (×rate)",
	"decisions/s", "p50 µs", "p99 µs", "p99.9 µs",
	"Redis calls/decision", "server µs/decision", "memory B/key", "error",
}

// WriteTable writes r as text: a header saying when and on what it ran,
// then one aligned table per scenario.
func WriteTable(w io.Writer, r Report) error {
	ew := &outErrWriter{w: w}
	for _, line := range outHeaderLines(r) {
		fmt.Fprintln(ew, line)
	}
	groups := outGroupByScenario(r.Results)
	if len(groups) == 0 {
		fmt.Fprintln(ew, "\nno results")
	}
	for _, g := range groups {
		fmt.Fprintf(ew, "\n== %s ==", outOneLine(g.name))
		if g.limit != "" {
			fmt.Fprintf(ew, "  (limit %s)", outOneLine(g.limit))
		}
		fmt.Fprintln(ew)
		var table bytes.Buffer
		tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(outColumns, "\t"))
		for _, res := range g.results {
			cells := outCells(res)
			for i := range cells {
				cells[i] = outOneLine(cells[i])
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		_ = tw.Flush() // cannot fail on a bytes.Buffer
		// An empty error cell leaves the padding of the one before it.
		for _, line := range strings.SplitAfter(table.String(), "\n") {
			io.WriteString(ew, strings.TrimRight(line, " \n"))
			if strings.HasSuffix(line, "\n") {
				io.WriteString(ew, "\n")
			}
		}
		for _, note := range outOverheadNotes(g) {
			fmt.Fprintln(ew, outOneLine(note))
		}
	}
	return ew.err
}

// outOverheadNotes states the overhead of each result that has one.
func outOverheadNotes(g outGroup) []string {
	var notes []string
	for _, res := range g.results {
		if o := res.Overhead; o != nil {
			notes = append(notes, fmt.Sprintf("overhead of %s over %s: p50 %s µs, %s µs per decision (1 / decisions/s)",
				res.Subject, o.Over, outSigned(o.P50Micros), outSigned(o.MicrosPerDecision)))
		}
	}
	return notes
}

func outSigned(v float64) string {
	if v >= 0 {
		return "+" + outMicros(v)
	}
	return "-" + outMicros(-v)
}

// WriteJSON writes r as indented JSON.
func WriteJSON(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteHTML writes r as one self-contained HTML page: the header, then per
// scenario its table and inline SVG charts of what was admitted over time,
// of latency and of the cost to the Redis server.
func WriteHTML(w io.Writer, r Report) error {
	return outPage.Execute(w, outBuildPage(r))
}

// outErrWriter remembers the first write error and swallows later writes.
type outErrWriter struct {
	w   io.Writer
	err error
}

func (e *outErrWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func outWhen(t time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	return t.Format("2006-01-02 15:04:05 MST")
}

func outOrUnknown(s string) string {
	if strings.TrimSpace(s) == "" {
		return "unknown"
	}
	return s
}

func outHeaderLines(r Report) []string {
	lines := []string{
		"Sluice rate-limiter benchmark",
		"started:  " + outOneLine(outWhen(r.Started)),
		"Redis:    " + outOneLine(outOrUnknown(r.Redis)),
		"machine:  " + outOneLine(outOrUnknown(r.Machine)),
	}
	if !r.Representative {
		lines = append(lines, "WARNING: "+outNotRepresentative)
	}
	for _, c := range r.Ceilings {
		lines = append(lines, fmt.Sprintf("ceiling:  %s: %s requests/s", outOneLine(c.Name), outThousands(int64(c.RequestsPerSec))))
	}
	return lines
}

// outOneLine keeps a cell on one line and out of tabwriter's columns.
func outOneLine(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '\t', '\n', '\r', '\v', '\f':
			return ' '
		}
		return r
	}, s)
}

type outGroup struct {
	name    string
	limit   string // the subjects' limit when they all share one
	results []Result
}

// outGroupByScenario groups results by scenario, in order of first
// appearance.
func outGroupByScenario(results []Result) []outGroup {
	var groups []outGroup
	index := map[string]int{}
	for _, res := range results {
		i, ok := index[res.Scenario]
		if !ok {
			i = len(groups)
			index[res.Scenario] = i
			groups = append(groups, outGroup{name: res.Scenario, limit: res.Limit})
		}
		g := &groups[i]
		if g.limit != res.Limit {
			g.limit = ""
		}
		g.results = append(g.results, res)
	}
	return groups
}

// outCells formats one result in the order of outColumns.
func outCells(r Result) []string {
	ratio := "-"
	if r.Ideal > 0 {
		ratio = strconv.FormatFloat(100*float64(r.Admitted)/float64(r.Ideal), 'f', 1, 64) + "%"
	}
	p50, p99, p999 := "-", "-", "-"
	if l := r.LatencyMicros; l.P50 != 0 || l.P99 != 0 || l.P999 != 0 {
		p50, p99, p999 = outMicros(l.P50), outMicros(l.P99), outMicros(l.P999)
		if ping := r.PingLatencyMicros; ping != nil && ping.P50 > 0 && ping.P99 > 0 {
			// Over the same client's PING, interleaved call by call.
			p50 += " (" + strconv.FormatFloat(l.P50/ping.P50, 'f', 2, 64) + "× PING)"
			p99 += " (" + strconv.FormatFloat(l.P99/ping.P99, 'f', 2, 64) + "× PING)"
		}
	}
	calls := "-"
	if r.RedisCallsPerDecision >= 0 {
		calls = strconv.FormatFloat(r.RedisCallsPerDecision, 'f', 2, 64)
	}
	server := "-"
	if r.ServerMicrosPerDecision >= 0 {
		server = outMicros(r.ServerMicrosPerDecision)
	}
	memory := "-"
	if r.MemoryPerKey > 0 {
		memory = strconv.FormatFloat(r.MemoryPerKey, 'f', 1, 64)
	}
	return []string{
		r.Subject,
		outThousands(r.Admitted),
		outThousands(r.Ideal),
		ratio,
		strconv.FormatFloat(r.WorstWindow, 'f', 2, 64),
		outThousands(int64(math.Round(r.DecisionsPerSecond))),
		p50, p99, p999,
		calls, server, memory,
		r.Error,
	}
}

// outMicros formats microseconds with a precision that suits their size.
func outMicros(v float64) string {
	switch a := math.Abs(v); {
	case a < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case a < 1000:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return outThousands(int64(math.Round(v)))
}

// outThousands writes n with commas between groups of three digits.
func outThousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return sign + b.String()
}

// outCompact writes an axis label: 1500 as 1.5k, 2000000 as 2M.
func outCompact(v float64) string {
	trim := func(x float64) string {
		s := strconv.FormatFloat(x, 'f', 2, 64)
		s = strings.TrimRight(s, "0")
		return strings.TrimSuffix(s, ".")
	}
	switch a := math.Abs(v); {
	case a >= 1e9:
		return trim(v/1e9) + "G"
	case a >= 1e6:
		return trim(v/1e6) + "M"
	case a >= 1e3:
		return trim(v/1e3) + "k"
	}
	return trim(v)
}

// outShorten cuts a label to at most n runes.
func outShorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func outFinite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// outNiceScale returns a round top for an axis showing up to max, and
// the step between its about five ticks.
func outNiceScale(max float64) (top, step float64) {
	max = outFinite(max)
	if max <= 0 {
		return 1, 0.2
	}
	raw := max / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step = 10 * mag
	for _, m := range []float64{1, 2, 2.5, 5} {
		if raw <= m*mag {
			step = m * mag
			break
		}
	}
	return math.Ceil(max/step-1e-9) * step, step
}

func outF(v float64) string { return strconv.FormatFloat(outFinite(v), 'f', 1, 64) }

// The view the template renders. Numbers are preformatted strings so the
// template only places them; html/template escapes every one.

type outPageView struct {
	Title     string
	When      string
	Redis     string
	Machine   string
	Warning   string
	Headline  []outHeadlineView
	Scenarios []outScenarioView
}

// outHeadlineView is one throughput scenario's headline comparison: a
// chart of the ratios, then the ratios as text.
type outHeadlineView struct {
	Scenario string
	Chart    *outBarChart
	Lines    []string
}

type outScenarioView struct {
	ID       string
	Name     string
	Limit    string
	Columns  []string
	Rows     []outRowView
	Admitted outLineChart
	Latency  *outBarChart
	Cost     *outBarChart
	Notes    []string
}

type outRowView struct {
	Cells []string
	Error bool
}

type outTick struct {
	X, Y, X2, Y2 string // the grid line
	TX, TY       string // where its label goes
	Label        string
}

type outLegendItem struct {
	X, Y, TX, TY, X2 string
	Colour           string
	Dashed           bool
	Label            string
	Full             string
}

type outPolyline struct {
	Name   string
	Colour string
	Points string
	Dashed bool
}

type outLineChart struct {
	ViewBox   string
	Label     string
	Left, Top string
	Right     string
	Bottom    string
	XTicks    []outTick
	YTicks    []outTick
	XTitleX   string
	XTitleY   string
	YTitleX   string
	YTitleY   string
	Lines     []outPolyline
	Legend    []outLegendItem
	Empty     bool
	EmptyX    string
	EmptyY    string
}

type outBar struct {
	X, Y, W, H string
	Colour     string
	TX, TY     string
	Text       string
	Title      string
	// Range, when set, draws a whisker from RX1 to RX2 at height RY,
	// with caps from RT to RB: a ratio's smallest and largest values
	// round by round.
	Range        bool
	RX1, RX2, RY string
	RT, RB       string
}

type outBarRow struct {
	Label  string
	Full   string
	LX, LY string
	Bars   []outBar
}

type outBarChart struct {
	ViewBox string
	Label   string
	Left    string
	Top     string
	Bottom  string
	XTicks  []outTick
	Rows    []outBarRow
	Legend  []outLegendItem
}

func outBuildPage(r Report) outPageView {
	v := outPageView{
		Title:   "Sluice benchmark — " + outWhen(r.Started),
		When:    outWhen(r.Started),
		Redis:   outOrUnknown(r.Redis),
		Machine: outOrUnknown(r.Machine),
	}
	if !r.Representative {
		v.Warning = outNotRepresentative
	}
	v.Headline = outHeadline(r)
	colours := map[string]string{}
	for _, res := range r.Results {
		if _, ok := colours[res.Subject]; !ok {
			colours[res.Subject] = outPalette[len(colours)%len(outPalette)]
		}
	}
	for i, g := range outGroupByScenario(r.Results) {
		sv := outScenarioView{
			ID:       "scenario-" + strconv.Itoa(i+1),
			Name:     g.name,
			Limit:    g.limit,
			Columns:  outColumns,
			Admitted: outAdmittedChart(g, colours),
			Latency:  outLatencyChart(g),
			Cost:     outCostChart(g, colours),
			Notes:    outOverheadNotes(g),
		}
		for _, res := range g.results {
			sv.Rows = append(sv.Rows, outRowView{Cells: outCells(res), Error: res.Error != ""})
		}
		v.Scenarios = append(v.Scenarios, sv)
	}
	return v
}

// Geometry of the admitted-over-time chart, in viewBox units.
const (
	outLineW      = 780.0
	outLineLeft   = 70.0
	outLineTop    = 16.0
	outLinePlotW  = 470.0
	outLinePlotH  = 250.0
	outLegendRow  = 18.0
	outLegendLen  = 24
	outBarW       = 780.0
	outBarLeft    = 220.0
	outBarPlotW   = 430.0
	outBarH       = 13.0
	outBarRowGap  = 12.0
	outBarLegendH = 24.0
)

func outAdmittedChart(g outGroup, colours map[string]string) outLineChart {
	left, top := outLineLeft, outLineTop
	right, bottom := left+outLinePlotW, top+outLinePlotH
	c := outLineChart{
		Label:  "Cumulative admitted over the run in " + g.name + ", per subject, against the ideal",
		Left:   outF(left),
		Top:    outF(top),
		Right:  outF(right),
		Bottom: outF(bottom),
	}

	type series struct {
		name, colour string
		values       []int64
		dashed       bool
	}
	var all []series
	for _, res := range g.results {
		if len(res.AdmittedOverTime) > 0 {
			all = append(all, series{name: res.Subject, colour: colours[res.Subject], values: res.AdmittedOverTime})
		}
	}
	// The ideal is the same for every subject of a scenario: take the
	// first result's (or the first that has one).
	for _, res := range g.results {
		if len(res.IdealOverTime) > 0 {
			all = append(all, series{name: "ideal", colour: outIdealColour, values: res.IdealOverTime, dashed: true})
			break
		}
	}

	var max float64
	for _, s := range all {
		for _, v := range s.values {
			max = math.Max(max, float64(v))
		}
	}
	yTop, yStep := outNiceScale(max)
	y := func(v float64) float64 { return bottom - outLinePlotH*outFinite(v)/yTop }

	for i := 0; i <= 10; i++ {
		x := left + outLinePlotW*float64(i)/10
		t := outTick{X: outF(x), Y: outF(top), X2: outF(x), Y2: outF(bottom), TX: outF(x), TY: outF(bottom + 16)}
		if i%2 == 0 {
			t.Label = strconv.Itoa(10*i) + "%"
		}
		c.XTicks = append(c.XTicks, t)
	}
	for i := 0; float64(i)*yStep <= yTop+yStep/1e6; i++ {
		v := float64(i) * yStep
		c.YTicks = append(c.YTicks, outTick{
			X: outF(left), Y: outF(y(v)), X2: outF(right), Y2: outF(y(v)),
			TX: outF(left - 6), TY: outF(y(v) + 4), Label: outCompact(v),
		})
	}
	c.XTitleX, c.XTitleY = outF(left+outLinePlotW/2), outF(bottom+36)
	c.YTitleX, c.YTitleY = outF(16), outF(top+outLinePlotH/2)

	legendX := right + 24
	for i, s := range all {
		var pts []string
		pts = append(pts, outF(left)+","+outF(bottom)) // nothing is admitted at the start
		for j, v := range s.values {
			x := left + outLinePlotW*float64(j+1)/float64(len(s.values))
			pts = append(pts, outF(x)+","+outF(y(float64(v))))
		}
		c.Lines = append(c.Lines, outPolyline{Name: s.name, Colour: s.colour, Points: strings.Join(pts, " "), Dashed: s.dashed})
		ly := top + 8 + float64(i)*outLegendRow
		c.Legend = append(c.Legend, outLegendItem{
			X: outF(legendX), X2: outF(legendX + 22), Y: outF(ly),
			TX: outF(legendX + 28), TY: outF(ly + 4),
			Colour: s.colour, Dashed: s.dashed,
			Label: outShorten(s.name, outLegendLen), Full: s.name,
		})
	}
	if len(all) == 0 {
		c.Empty = true
		c.EmptyX, c.EmptyY = outF(left+outLinePlotW/2), outF(top+outLinePlotH/2)
	}

	height := math.Max(bottom+48, top+8+float64(len(all))*outLegendRow+8)
	c.ViewBox = "0 0 " + outF(outLineW) + " " + outF(height)
	return c
}

type outBarInput struct {
	label  string
	values []float64
	colour []string
	texts  []string
	titles []string
	ranges []*[2]float64 // optional, one per value: a whisker from [0] to [1]
}

// outHBars lays out a horizontal bar chart: one row per input, one bar per
// value, on a linear axis from zero.
func outHBars(label string, rows []outBarInput, legend []outLegendItem) *outBarChart {
	if len(rows) == 0 {
		return nil
	}
	var max float64
	for _, r := range rows {
		for _, v := range r.values {
			max = math.Max(max, outFinite(v))
		}
		for _, rg := range r.ranges {
			if rg != nil {
				max = math.Max(max, outFinite(rg[1]))
			}
		}
	}
	xTop, xStep := outNiceScale(max)
	left, top := outBarLeft, 8.0
	if len(legend) > 0 {
		top += outBarLegendH
	}
	x := func(v float64) float64 { return outBarPlotW * math.Max(0, outFinite(v)) / xTop }

	c := &outBarChart{Label: label, Left: outF(left), Top: outF(top)}
	yy := top
	for _, r := range rows {
		h := float64(len(r.values))*(outBarH+2) - 2 + outBarRowGap
		row := outBarRow{
			Label: outShorten(r.label, 32), Full: r.label,
			LX: outF(left - 8), LY: outF(yy + (h-outBarRowGap)/2 + 4),
		}
		for i, v := range r.values {
			by := yy + float64(i)*(outBarH+2)
			w := x(v)
			bar := outBar{
				X: outF(left), Y: outF(by), W: outF(w), H: outF(outBarH),
				Colour: r.colour[i],
				TX:     outF(left + w + 4), TY: outF(by + outBarH - 3),
				Text: r.texts[i], Title: r.titles[i],
			}
			if i < len(r.ranges) && r.ranges[i] != nil {
				lo, hi := x(r.ranges[i][0]), x(r.ranges[i][1])
				bar.Range = true
				bar.RX1, bar.RX2, bar.RY = outF(left+lo), outF(left+hi), outF(by+outBarH/2)
				bar.RT, bar.RB = outF(by+2), outF(by+outBarH-2)
				bar.TX = outF(left + math.Max(w, hi) + 4)
			}
			row.Bars = append(row.Bars, bar)
		}
		c.Rows = append(c.Rows, row)
		yy += h
	}
	bottom := yy
	c.Bottom = outF(bottom)
	for i := 0; float64(i)*xStep <= xTop+xStep/1e6; i++ {
		v := float64(i) * xStep
		px := left + x(v)
		c.XTicks = append(c.XTicks, outTick{
			X: outF(px), Y: outF(top - 4), X2: outF(px), Y2: outF(bottom),
			TX: outF(px), TY: outF(bottom + 16), Label: outCompact(v),
		})
	}
	for i := range legend {
		lx := left + float64(i)*90
		legend[i].X, legend[i].X2 = outF(lx), outF(lx+14)
		legend[i].Y, legend[i].TX, legend[i].TY = outF(10), outF(lx+18), outF(14)
	}
	c.Legend = legend
	c.ViewBox = "0 0 " + outF(outBarW) + " " + outF(bottom+28)
	return c
}

// outHeadline charts each headline comparison as two bars, decisions per
// second and Redis CPU per decision, each as a multiple of the other
// subject's (1 × = as fast, as costly).
func outHeadline(r Report) []outHeadlineView {
	var out []outHeadlineView
	for _, h := range HeadlineOf(r) {
		hv := outHeadlineView{Scenario: h.Scenario}
		var rows []outBarInput
		for _, l := range h.Rows {
			label := l.Label
			if label == "" { // a report written before labels
				label = l.Subject + " vs " + l.Other
			}
			in := outBarInput{
				label:  label,
				values: []float64{l.DecisionsRatio},
				colour: []string{outP50Colour},
				texts:  []string{strconv.FormatFloat(l.DecisionsRatio, 'f', 2, 64) + " × decisions/s"},
				titles: []string{label + ": " + thousands(l.SubjectDecisions) + " vs " + thousands(l.OtherDecisions) + " decisions/s" + RangeText(l.DecisionsRatioRange)},
				ranges: []*[2]float64{l.DecisionsRatioRange},
			}
			line := fmt.Sprintf("%s: %.2f ×%s the decisions/s of %s (%s vs %s)", l.Subject, l.DecisionsRatio, RangeText(l.DecisionsRatioRange), l.Other,
				thousands(l.SubjectDecisions), thousands(l.OtherDecisions))
			if l.ServerMicrosRatio > 0 {
				in.values = append(in.values, l.ServerMicrosRatio)
				in.colour = append(in.colour, outP99Colour)
				in.texts = append(in.texts, strconv.FormatFloat(l.ServerMicrosRatio, 'f', 2, 64)+" × Redis CPU/decision")
				in.titles = append(in.titles, label+": Redis server time per decision, as a multiple of the other's"+RangeText(l.ServerMicrosRatioRange))
				in.ranges = append(in.ranges, l.ServerMicrosRatioRange)
				line += fmt.Sprintf(", %.2f ×%s its Redis CPU per decision", l.ServerMicrosRatio, RangeText(l.ServerMicrosRatioRange))
			}
			rows = append(rows, in)
			hv.Lines = append(hv.Lines, line)
		}
		legend := []outLegendItem{
			{Colour: outP50Colour, Label: "decisions/s", Full: "decisions per second, as a multiple of the other's"},
			{Colour: outP99Colour, Label: "Redis CPU", Full: "Redis server time per decision, as a multiple of the other's"},
		}
		hv.Chart = outHBars("Headline, "+h.Scenario+": each comparison as a multiple of the other subject", rows, legend)
		out = append(out, hv)
	}
	return out
}

func outLatencyChart(g outGroup) *outBarChart {
	var rows []outBarInput
	for _, res := range g.results {
		l := res.LatencyMicros
		if l.P50 == 0 && l.P99 == 0 {
			continue
		}
		rows = append(rows, outBarInput{
			label:  res.Subject,
			values: []float64{l.P50, l.P99},
			colour: []string{outP50Colour, outP99Colour},
			texts:  []string{"p50 " + outMicros(l.P50) + " µs", "p99 " + outMicros(l.P99) + " µs"},
			titles: []string{res.Subject + ": p50 " + outMicros(l.P50) + " µs", res.Subject + ": p99 " + outMicros(l.P99) + " µs"},
		})
	}
	legend := []outLegendItem{
		{Colour: outP50Colour, Label: "p50", Full: "median latency"},
		{Colour: outP99Colour, Label: "p99", Full: "99th percentile latency"},
	}
	return outHBars("Latency per decision in "+g.name+", µs, p50 and p99 per subject", rows, legend)
}

func outCostChart(g outGroup, colours map[string]string) *outBarChart {
	var rows []outBarInput
	for _, res := range g.results {
		if res.ServerMicrosPerDecision < 0 {
			continue
		}
		text := outMicros(res.ServerMicrosPerDecision) + " µs"
		if res.RedisCallsPerDecision >= 0 {
			text += " · " + strconv.FormatFloat(res.RedisCallsPerDecision, 'f', 2, 64) + " calls"
		}
		rows = append(rows, outBarInput{
			label:  res.Subject,
			values: []float64{res.ServerMicrosPerDecision},
			colour: []string{colours[res.Subject]},
			texts:  []string{text},
			titles: []string{res.Subject + ": " + text + " per decision"},
		})
	}
	return outHBars("Redis server time per decision in "+g.name+", µs, per subject", rows, nil)
}

var outPage = template.Must(template.New("page").Parse(outPageHTML))

// outPageHTML is written to be well-formed XML as well as HTML (void
// elements self-closed, no named entities) so it is easy to check.
const outPageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8"/>
<meta name="viewport" content="width=device-width, initial-scale=1"/>
<title>{{.Title}}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222; margin: 2em auto; max-width: 1200px; padding: 0 1em; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.3em; }
h2 { margin-top: 2em; border-bottom: 1px solid #ccc; padding-bottom: 0.2em; }
h3 { font-size: 1em; margin: 1.5em 0 0.3em; color: #444; }
dl.meta { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; margin: 0.5em 0; }
dl.meta dt { font-weight: 600; }
dl.meta dd { margin: 0; }
.warning { background: #fff3cd; border: 1px solid #e0b400; border-radius: 4px; padding: 0.6em 0.9em; }
nav ul { padding-left: 1.2em; }
.limit, .note { color: #555; font-style: italic; }
.tablewrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { padding: 0.3em 0.6em; border-bottom: 1px solid #e4e4e4; white-space: nowrap; }
th { background: #f4f4f4; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.error { color: #b00020; white-space: normal; }
tr.err td { background: #fff0f0; }
svg.chart { display: block; width: 100%; max-width: 900px; height: auto; font-size: 12px; }
svg.chart text { fill: #333; }
svg.chart .grid { stroke: #e6e6e6; stroke-width: 1; }
svg.chart .axis { stroke: #888; stroke-width: 1; }
svg.chart .tick { text-anchor: middle; fill: #666; }
svg.chart .ytick { text-anchor: end; fill: #666; }
svg.chart .label { text-anchor: end; }
svg.chart .title { text-anchor: middle; fill: #555; }
svg.chart .range { stroke: #222; stroke-width: 1.5; fill: none; }
</style>
</head>
<body>
<h1>Sluice rate-limiter benchmark</h1>
<dl class="meta">
<dt>Started</dt><dd>{{.When}}</dd>
<dt>Redis</dt><dd>{{.Redis}}</dd>
<dt>Machine</dt><dd>{{.Machine}}</dd>
</dl>
{{if .Warning}}<p class="warning"><strong>Warning:</strong> {{.Warning}}.</p>
{{end}}
{{- if .Headline}}<section id="headline">
<h2>Headline</h2>
<p class="note">Each bar is a ratio of the two subjects' figures over the whole run; where the scenario ran in rounds, the black whisker spans the smallest to the largest ratio round by round.</p>
{{range .Headline}}<h3>{{.Scenario}}</h3>
{{template "bars" .Chart}}<ul>
{{range .Lines}}<li>{{.}}</li>
{{end}}</ul>
{{end}}</section>
{{end}}
{{- if .Scenarios}}<nav><ul>
{{range .Scenarios}}<li><a href="#{{.ID}}">{{.Name}}</a></li>
{{end}}</ul></nav>
{{else}}<p class="note">No results.</p>
{{end}}
{{- range .Scenarios}}
<section id="{{.ID}}">
<h2>{{.Name}}</h2>
{{if .Limit}}<p class="limit">limit: {{.Limit}}</p>
{{end -}}
<div class="tablewrap"><table>
<thead><tr>{{range .Columns}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>
{{range .Rows}}<tr{{if .Error}} class="err"{{end}}>{{range $i, $c := .Cells}}{{if eq $i 0}}<td>{{$c}}</td>{{else if eq $i 12}}<td class="error">{{$c}}</td>{{else}}<td class="num">{{$c}}</td>{{end}}{{end}}</tr>
{{end}}</tbody>
</table></div>
{{range .Notes}}<p class="note">{{.}}</p>
{{end}}
<h3>Admitted over time</h3>
{{with .Admitted}}<svg class="chart admitted" viewBox="{{.ViewBox}}" role="img" aria-label="{{.Label}}">
{{range .XTicks}}<line class="grid" x1="{{.X}}" y1="{{.Y}}" x2="{{.X2}}" y2="{{.Y2}}"/>{{if .Label}}<text class="tick" x="{{.TX}}" y="{{.TY}}">{{.Label}}</text>{{end}}
{{end}}{{range .YTicks}}<line class="grid" x1="{{.X}}" y1="{{.Y}}" x2="{{.X2}}" y2="{{.Y2}}"/><text class="ytick" x="{{.TX}}" y="{{.TY}}">{{.Label}}</text>
{{end}}<line class="axis" x1="{{.Left}}" y1="{{.Bottom}}" x2="{{.Right}}" y2="{{.Bottom}}"/>
<line class="axis" x1="{{.Left}}" y1="{{.Top}}" x2="{{.Left}}" y2="{{.Bottom}}"/>
<text class="title" x="{{.XTitleX}}" y="{{.XTitleY}}">share of the run</text>
<text class="title" transform="translate({{.YTitleX}} {{.YTitleY}}) rotate(-90)">cumulative admitted</text>
{{range .Lines}}<polyline fill="none" stroke="{{.Colour}}" stroke-width="{{if .Dashed}}1.5{{else}}2{{end}}"{{if .Dashed}} stroke-dasharray="6 4"{{end}} stroke-linejoin="round" points="{{.Points}}"><title>{{.Name}}</title></polyline>
{{end}}{{range .Legend}}<line x1="{{.X}}" y1="{{.Y}}" x2="{{.X2}}" y2="{{.Y}}" stroke="{{.Colour}}" stroke-width="3"{{if .Dashed}} stroke-dasharray="6 4"{{end}}/><text x="{{.TX}}" y="{{.TY}}"><title>{{.Full}}</title>{{.Label}}</text>
{{end}}{{if .Empty}}<text class="title" x="{{.EmptyX}}" y="{{.EmptyY}}">no data</text>
{{end}}</svg>
{{end}}
<h3>Latency per decision (µs)</h3>
{{with .Latency}}{{template "bars" .}}{{else}}<p class="note">No latency recorded.</p>
{{end}}
<h3>Redis server time per decision (µs)</h3>
{{with .Cost}}{{template "bars" .}}{{else}}<p class="note">Not measured (in-process subjects or the embedded store).</p>
{{end -}}
</section>
{{end}}
<footer><p class="note">Generated by the Sluice benchmark harness.</p></footer>
</body>
</html>
{{define "bars"}}<svg class="chart bars" viewBox="{{.ViewBox}}" role="img" aria-label="{{.Label}}">
{{range .Legend}}<rect x="{{.X}}" y="{{.Y}}" width="12" height="8" fill="{{.Colour}}"/><text x="{{.TX}}" y="{{.TY}}"><title>{{.Full}}</title>{{.Label}}</text>
{{end}}{{range .XTicks}}<line class="grid" x1="{{.X}}" y1="{{.Y}}" x2="{{.X2}}" y2="{{.Y2}}"/><text class="tick" x="{{.TX}}" y="{{.TY}}">{{.Label}}</text>
{{end}}{{range .Rows}}<text class="label" x="{{.LX}}" y="{{.LY}}"><title>{{.Full}}</title>{{.Label}}</text>
{{range .Bars}}<rect x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}" fill="{{.Colour}}"><title>{{.Title}}</title></rect>{{if .Range}}<path class="range" d="M{{.RX1}} {{.RT}}V{{.RB}}M{{.RX1}} {{.RY}}H{{.RX2}}M{{.RX2}} {{.RT}}V{{.RB}}"/>{{end}}<text x="{{.TX}}" y="{{.TY}}">{{.Text}}</text>
{{end}}{{end}}<line class="axis" x1="{{.Left}}" y1="{{.Top}}" x2="{{.Left}}" y2="{{.Bottom}}"/>
</svg>
{{end}}`
