package replay

// The geometry of WriteHTML's inline SVG charts. Every coordinate is
// computed here and formatted as a string; the template in html.go only
// places them, and html/template escapes every label.

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// chartPalette is the bench report's palette (bench/harness), so that the
// two pages look like one product: algorithms take its colours in order of
// first appearance in a report.
var chartPalette = []string{
	"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
	"#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
}

const (
	colourAllowed     = "#4e79a7"
	colourDenied      = "#e15759"
	colourWellBehaved = "#f28e2b"
	colourTarget      = "#222222"
)

// svgTick is a grid line from (X1, Y1) to (X2, Y2) and its label at
// (TX, TY).
type svgTick struct {
	X1, Y1, X2, Y2 string
	TX, TY, Label  string
}

type svgLine struct {
	Name, Colour, Points string
}

// svgLegend is a swatch (a short thick line, so that a chart's rects are
// its bars only) and its label.
type svgLegend struct {
	X1, X2, Y, TX, TY string
	Colour, Label     string
	Full              string
	Dashed            bool
}

type svgMark struct {
	X, Y, Colour, Title string
}

// lineChart is a chart of polylines over x and y axes.
type lineChart struct {
	Class, ViewBox, Label    string
	Left, Top, Right, Bottom string
	XTicks, YTicks           []svgTick
	XTitle, YTitle           string
	XTitleX, XTitleY         string
	YTitleX, YTitleY         string
	Lines                    []svgLine
	Marks                    []svgMark
	Rule                     *svgTick // a dashed horizontal reference line
	Legend                   []svgLegend
	Empty                    string // said in the middle when there are no lines
	EmptyX, EmptyY           string
}

type svgBar struct {
	X, Y, W, H, Colour string
	Title              string
	TX, TY, Text       string
	Label, Full        string
	LX, LY             string
}

// barChart is a chart of horizontal bars, one rect each.
type barChart struct {
	ViewBox, Label       string
	Left, Top, Bottom    string
	XTicks               []svgTick
	Bars                 []svgBar
	Legend               []svgLegend
	XTitle, XTX, XTitleY string
}

// f1 formats a coordinate; NaN and infinities, which no input should
// produce, are drawn at 0 rather than breaking the SVG.
func f1(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		v = 0
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// axisScale returns the top of an axis from 0 that shows up to high, a
// round number, and the step between its four to six ticks.
func axisScale(high float64) (top, step float64) {
	if !(high > 0) || math.IsInf(high, 0) {
		return 1, 0.2
	}
	mag := math.Pow(10, math.Floor(math.Log10(high/5)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if step = m * mag; high/step <= 5 {
			break
		}
	}
	return step * math.Ceil(high/step-1e-9), step
}

// axisLabel writes an axis value short: 1500 as 1.5k.
func axisLabel(v float64) string {
	suffix := ""
	for _, u := range []struct {
		div float64
		s   string
	}{{1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if math.Abs(v) >= u.div {
			v, suffix = v/u.div, u.s
			break
		}
	}
	s := strings.TrimRight(strconv.FormatFloat(v, 'f', 2, 64), "0")
	return strings.TrimSuffix(s, ".") + suffix
}

// shorten cuts s to at most n runes.
func shorten(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// timeTicks are the round times within [start, start+span], UTC, about
// five of them, with labels as precise as their spacing needs.
func timeTicks(start time.Time, span time.Duration) (at []time.Time, layout string) {
	steps := []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 2 * 24 * time.Hour, 7 * 24 * time.Hour}
	step := steps[len(steps)-1]
	for _, s := range steps {
		if span/s <= 5 {
			step = s
			break
		}
	}
	if span/step > 5 {
		step = (span/5 + 24*time.Hour - 1).Truncate(24 * time.Hour)
	}
	start, end := start.UTC(), start.UTC().Add(span)
	switch {
	case step >= 24*time.Hour:
		layout = "Jan 2"
	case start.YearDay() != end.YearDay() || start.Year() != end.Year():
		layout = "Jan 2 15:04"
	case step >= time.Minute:
		layout = "15:04"
	default:
		layout = "15:04:05"
	}
	t := start.Truncate(step)
	if t.Before(start) {
		t = t.Add(step)
	}
	for ; !t.After(end); t = t.Add(step) {
		at = append(at, t)
	}
	return at, layout
}

// Geometry of a timeline chart, in viewBox units.
const (
	tlWidth = 620.0
	tlLeft  = 62.0
	tlTop   = 30.0
	tlPlotW = 520.0
	tlPlotH = 170.0
)

// timelineChart charts r's timeline: what was allowed and what denied in
// each step, as steps of a polyline each, on a y axis from 0 to yTop
// shared by the charts of a policy.
func timelineChart(r *Result, yTop, yStep float64) lineChart {
	tl := r.Timeline
	left, top, right, bottom := tlLeft, tlTop, tlLeft+tlPlotW, tlTop+tlPlotH
	c := lineChart{
		Class: "chart timeline", Label: "Requests allowed and denied over time, policy " + r.Policy + ", " + r.Algorithm,
		Left: f1(left), Top: f1(top), Right: f1(right), Bottom: f1(bottom),
		ViewBox: "0 0 " + f1(tlWidth) + " " + f1(bottom+46),
		XTitleX: f1(left + tlPlotW/2), XTitleY: f1(bottom + 38),
		YTitleX: f1(14), YTitleY: f1(top + tlPlotH/2),
		XTitle: "time (UTC)", YTitle: "requests",
	}
	y := func(v float64) float64 { return bottom - tlPlotH*v/yTop }
	for v := 0.0; v <= yTop+yStep/1e6; v += yStep {
		c.YTicks = append(c.YTicks, svgTick{X1: f1(left), Y1: f1(y(v)), X2: f1(right), Y2: f1(y(v)),
			TX: f1(left - 6), TY: f1(y(v) + 4), Label: axisLabel(v)})
	}
	for i, l := range []struct{ name, colour string }{{"allowed", colourAllowed}, {"denied", colourDenied}} {
		x := left + float64(i)*100
		c.Legend = append(c.Legend, svgLegend{X1: f1(x), X2: f1(x + 22), Y: f1(12), TX: f1(x + 28), TY: f1(16),
			Colour: l.colour, Label: l.name, Full: "requests " + l.name + " per step"})
	}
	n := min(len(tl.Allowed), len(tl.Denied))
	if n == 0 || tl.Step <= 0 {
		c.Empty, c.EmptyX, c.EmptyY = "no requests", f1(left+tlPlotW/2), f1(top+tlPlotH/2)
		return c
	}
	span := time.Duration(n) * tl.Step
	c.YTitle = "requests per " + tl.Step.String()
	c.XTitle = "time (UTC) from " + tl.Start.UTC().Format(time.DateTime)
	x := func(i int) float64 { return left + tlPlotW*float64(i)/float64(n) }
	ticks, layout := timeTicks(tl.Start, span)
	for _, t := range ticks {
		px := left + tlPlotW*float64(t.Sub(tl.Start.UTC()))/float64(span)
		c.XTicks = append(c.XTicks, svgTick{X1: f1(px), Y1: f1(top), X2: f1(px), Y2: f1(bottom),
			TX: f1(px), TY: f1(bottom + 16), Label: t.Format(layout)})
	}
	for _, s := range []struct {
		name, colour string
		counts       []int64
	}{{"allowed", colourAllowed, tl.Allowed[:n]}, {"denied", colourDenied, tl.Denied[:n]}} {
		pts := make([]string, 0, 2*n)
		for i, v := range s.counts {
			py := f1(y(float64(v)))
			pts = append(pts, f1(x(i))+","+py, f1(x(i+1))+","+py)
		}
		c.Lines = append(c.Lines, svgLine{Name: s.name + ", " + r.Algorithm, Colour: s.colour, Points: strings.Join(pts, " ")})
	}
	return c
}

// Geometry of a keys chart.
const (
	kbWidth = 620.0
	kbLeft  = 170.0
	kbTop   = 30.0
	kbPlotW = 300.0
	kbBarH  = 14.0
	kbGap   = 6.0
)

// keysChart draws one bar per key, its denials, on an x axis from 0 to
// xTop shared by the charts of a policy; keys denied although within the
// rate on average are drawn in their own colour.
func keysChart(r *Result, xTop, xStep float64) *barChart {
	if len(r.TopKeys) == 0 {
		return nil
	}
	left, top := kbLeft, kbTop
	bottom := top + float64(len(r.TopKeys))*(kbBarH+kbGap)
	c := &barChart{
		Label: "Denials per key, policy " + r.Policy + ", " + r.Algorithm,
		Left:  f1(left), Top: f1(top), Bottom: f1(bottom),
		ViewBox: "0 0 " + f1(kbWidth) + " " + f1(bottom+44),
		XTitle:  "requests denied", XTX: f1(left + kbPlotW/2), XTitleY: f1(bottom + 36),
	}
	x := func(v float64) float64 { return kbPlotW * max(0, v) / xTop }
	for i, l := range []struct{ colour, label, full string }{
		{colourDenied, "denied", "a key's denials"},
		{colourWellBehaved, "within the rate on average", "a key denied although its average rate over the log stayed within the limit"},
	} {
		lx := left + float64(i)*90
		c.Legend = append(c.Legend, svgLegend{X1: f1(lx), X2: f1(lx + 14), Y: f1(12), TX: f1(lx + 20), TY: f1(16),
			Colour: l.colour, Label: l.label, Full: l.full})
	}
	for i, k := range r.TopKeys {
		by := top + float64(i)*(kbBarH+kbGap)
		w := max(1, x(float64(k.Denied)))
		colour, note := colourDenied, ""
		if k.WellBehaved {
			colour, note = colourWellBehaved, "; within the rate on average"
		}
		c.Bars = append(c.Bars, svgBar{
			X: f1(left), Y: f1(by), W: f1(w), H: f1(kbBarH), Colour: colour,
			Title: k.Key + ": " + num(k.Denied) + " denied of " + num(k.Requests) + " requests (cost " + num(k.Cost) + ")" + note,
			TX:    f1(left + w + 4), TY: f1(by + kbBarH - 3), Text: num(k.Denied) + " of " + num(k.Requests),
			Label: shorten(k.Key, 24), Full: k.Key, LX: f1(left - 8), LY: f1(by + kbBarH - 3),
		})
	}
	for v := 0.0; v <= xTop+xStep/1e6; v += xStep {
		px := left + x(v)
		c.XTicks = append(c.XTicks, svgTick{X1: f1(px), Y1: f1(top - 4), X2: f1(px), Y2: f1(bottom),
			TX: f1(px), TY: f1(bottom + 16), Label: axisLabel(v)})
	}
	return c
}

// Geometry of a ladder chart.
const (
	ldWidth = 780.0
	ldLeft  = 62.0
	ldTop   = 16.0
	ldPlotW = 470.0
	ldPlotH = 220.0
)

// ladderChart draws, per algorithm of a policy, the share of keys denied
// at each limit of the target's ladder against the limit as a multiple of
// the policy's (a log scale), the target as a dashed line and each fitted
// limit as a dot. nil when no result has a ladder.
func ladderChart(group []Result, target float64, colours map[string]string) *lineChart {
	left, top, right, bottom := ldLeft, ldTop, ldLeft+ldPlotW, ldTop+ldPlotH
	c := &lineChart{
		Class: "chart ladder", Label: "Share of keys denied at each limit of the ladder, policy " + group[0].Policy,
		Left: f1(left), Top: f1(top), Right: f1(right), Bottom: f1(bottom),
		XTitleX: f1(left + ldPlotW/2), XTitleY: f1(bottom + 38), YTitleX: f1(14), YTitleY: f1(top + ldPlotH/2),
		XTitle: "limit as a multiple of the policy's (log scale)", YTitle: "keys denied",
	}
	// log2 of the factor, -4 (1/16) to 4 (16), across the plot.
	x := func(factor float64) float64 { return left + ldPlotW*(min(4, max(-4, math.Log2(factor)))+4)/8 }
	y := func(share float64) float64 { return bottom - ldPlotH*min(1, max(0, share)) }
	for k := -4; k <= 4; k++ {
		px := x(math.Pow(2, float64(k)))
		label := strconv.Itoa(1<<max(k, 0)) + "×"
		if k < 0 {
			label = "1/" + strconv.Itoa(1<<-k) + "×"
		}
		c.XTicks = append(c.XTicks, svgTick{X1: f1(px), Y1: f1(top), X2: f1(px), Y2: f1(bottom), TX: f1(px), TY: f1(bottom + 16), Label: label})
	}
	for p := 0; p <= 100; p += 20 {
		py := y(float64(p) / 100)
		c.YTicks = append(c.YTicks, svgTick{X1: f1(left), Y1: f1(py), X2: f1(right), Y2: f1(py), TX: f1(left - 6), TY: f1(py + 4), Label: strconv.Itoa(p) + "%"})
	}
	c.Rule = &svgTick{X1: f1(left), Y1: f1(y(target)), X2: f1(right), Y2: f1(y(target)), TX: f1(right - 4), TY: f1(y(target) - 5),
		Label: "target " + strconv.FormatFloat(target*100, 'g', -1, 64) + "%"}
	for _, r := range group {
		if r.Target == nil || len(r.Target.Ladder) == 0 || r.Limit.Rate <= 0 {
			continue
		}
		var pts []string
		for _, s := range r.Target.Ladder {
			share := 0.0
			if r.Keys > 0 {
				share = float64(s.DeniedKeys) / float64(r.Keys)
			}
			pts = append(pts, f1(x(float64(s.Limit.Rate)/float64(r.Limit.Rate)))+","+f1(y(share)))
			if fit := r.Target.Limit; fit != nil && *fit == s.Limit {
				c.Marks = append(c.Marks, svgMark{X: f1(x(float64(s.Limit.Rate) / float64(r.Limit.Rate))), Y: f1(y(share)), Colour: colours[r.Algorithm],
					Title: r.Algorithm + ": " + limitText(s.Limit) + ", " + strconv.FormatFloat(share*100, 'f', 2, 64) + "% of keys denied"})
			}
		}
		ly := top + 8 + float64(len(c.Lines))*18
		c.Lines = append(c.Lines, svgLine{Name: r.Algorithm, Colour: colours[r.Algorithm], Points: strings.Join(pts, " ")})
		c.Legend = append(c.Legend, svgLegend{X1: f1(right + 24), X2: f1(right + 46), Y: f1(ly), TX: f1(right + 52), TY: f1(ly + 4),
			Colour: colours[r.Algorithm], Label: r.Algorithm, Full: r.Algorithm})
	}
	if len(c.Lines) == 0 {
		return nil
	}
	c.ViewBox = "0 0 " + f1(ldWidth) + " " + f1(max(bottom+46, top+16+float64(len(c.Lines))*18))
	return c
}
