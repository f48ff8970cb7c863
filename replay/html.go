package replay

import (
	"bytes"
	"errors"
	"html/template"
	"io"
	"strconv"
	"time"
)

// maxHTMLSkipped is how many skipped lines the page lists.
const maxHTMLSkipped = 5

// WriteHTML writes rep as one self-contained HTML page: nothing is loaded
// from elsewhere (no script, font or style sheet; the charts are inline
// SVG) and every key, policy and reason is escaped. At the top the input
// (records, span, skipped lines with the first of them, records out of
// order and subject to no policy); then per policy a section with the id
// "policy-N" (N from 1, in report order) holding the table WriteText
// writes, per algorithm a chart of the requests allowed and denied over
// time (class "chart timeline", two polylines: allowed and denied; "no
// requests" and none when its timeline is empty) and a bar chart of the
// denials of its top keys (class "chart keys", one rect per key; none when
// no key was denied), and with a target the limit each algorithm needs and
// a chart of the share of keys denied along the ladder (class "chart
// ladder", one polyline per algorithm). The page is rendered in full,
// then written to w at once; the error is w's.
func WriteHTML(w io.Writer, rep *Report) error {
	if rep == nil {
		return errors.New("replay: WriteHTML of a nil report")
	}
	var buf bytes.Buffer
	if err := htmlPage.Execute(&buf, buildPage(rep)); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

type pageView struct {
	Summary     []metaRow
	Skipped     []string
	SkippedMore string
	Policies    []policyView
}

type metaRow struct{ Name, Value string }

type policyView struct {
	ID, Name, Limit string
	Columns         []string
	Rows            []rowView
	Notes           []string
	Algorithms      []algorithmView
	Target          string
	Fits            []string
	Ladder          *lineChart
}

type rowView struct {
	Cells []string
	Own   bool
}

type algorithmView struct {
	Name     string
	Own      bool
	Timeline lineChart
	Keys     *barChart
}

// htmlColumns mirror WriteText's table.
var htmlColumns = []string{"algorithm", "requests", "allowed", "denied", "denied %", "keys", "denied keys",
	"well-behaved keys denied", "their denials", "worst window / rate"}

func limitText(l Limit) string {
	return strconv.FormatInt(l.Rate, 10) + " per " + l.Period + ", burst " + strconv.FormatInt(l.Burst, 10)
}

func buildPage(rep *Report) pageView {
	in := rep.Input
	records := num(in.Records)
	if in.Format != "" {
		records += " (" + in.Format + ")"
	}
	span := "-"
	if !in.First.IsZero() {
		span = in.First.UTC().Format(time.DateTime) + " to " + in.Last.UTC().Format(time.DateTime) + " UTC (" + in.Last.Sub(in.First).String() + ")"
	}
	v := pageView{Summary: []metaRow{
		{"Records", records},
		{"Span", span},
		{"Skipped lines", num(in.Skipped)},
		{"Out of order", num(in.OutOfOrder) + " (logged earlier than a record before them; decided at the later time)"},
		{"Unmatched", num(in.Unmatched) + " (subject to no policy)"},
	}}
	if rep.Target > 0 {
		v.Summary = append(v.Summary, metaRow{"Target", "the smallest limit denying at most " + percent(rep.Target) + " of keys"})
	}
	for i, e := range in.SkippedLines {
		if i == maxHTMLSkipped {
			v.SkippedMore = "the JSON report lists the first " + strconv.Itoa(len(in.SkippedLines))
			break
		}
		v.Skipped = append(v.Skipped, "line "+strconv.FormatInt(e.Line, 10)+": "+e.Reason)
	}
	colours := map[string]string{}
	for _, r := range rep.Results {
		if _, ok := colours[r.Algorithm]; !ok {
			colours[r.Algorithm] = chartPalette[len(colours)%len(chartPalette)]
		}
	}
	for i, group := range byPolicy(rep.Results) {
		v.Policies = append(v.Policies, buildPolicy(i, group, rep.Target, colours))
	}
	return v
}

func percent(share float64) string { return strconv.FormatFloat(share*100, 'g', -1, 64) + "%" }

func buildPolicy(i int, group []Result, target float64, colours map[string]string) policyView {
	own := group[0]
	for _, r := range group {
		if r.Own {
			own = r
			break
		}
	}
	p := policyView{ID: "policy-" + strconv.Itoa(i+1), Name: own.Policy, Limit: limitText(own.Limit), Columns: htmlColumns}
	// The axes a policy's charts share, so its algorithms compare at a
	// glance.
	var perStep, keyDenials float64
	for _, r := range group {
		for _, c := range [][]int64{r.Timeline.Allowed, r.Timeline.Denied} {
			for _, n := range c {
				perStep = max(perStep, float64(n))
			}
		}
		for _, k := range r.TopKeys {
			keyDenials = max(keyDenials, float64(k.Denied))
		}
	}
	yTop, yStep := axisScale(perStep)
	xTop, xStep := axisScale(keyDenials)
	for _, r := range group {
		name := r.Algorithm
		if r.Own {
			name += " *"
		}
		p.Rows = append(p.Rows, rowView{Own: r.Own, Cells: []string{name, num(r.Requests), num(r.Allowed), num(r.Denied), pct(r.Denied, r.Requests),
			num(r.Keys), num(r.DeniedKeys), num(r.WellBehavedKeys), num(r.WellBehavedDenials), ratio(r.Worst.Admitted, r.Worst.Rate)}})
		if r.Worst.Admitted > 0 {
			p.Notes = append(p.Notes, "Worst window, "+r.Algorithm+": "+num(r.Worst.Admitted)+" admitted to "+r.Worst.Key+
				" in the period from "+r.Worst.Start.UTC().Format(time.DateTime)+" (rate "+num(r.Worst.Rate)+").")
		}
		if r.OverCapacity > 0 {
			p.Notes = append(p.Notes, r.Algorithm+": "+num(r.OverCapacity)+" requests cost more than the limit can ever allow.")
		}
		if r.DroppedKeys > 0 {
			p.Notes = append(p.Notes, r.Algorithm+": "+num(r.DroppedKeys)+" idle keys were forgotten to bound memory (--max-keys); keys and denied keys are estimates (within about 1%).")
		}
		p.Algorithms = append(p.Algorithms, algorithmView{Name: r.Algorithm, Own: r.Own,
			Timeline: timelineChart(&r, yTop, yStep), Keys: keysChart(&r, xTop, xStep)})
	}
	if target > 0 {
		p.Target = percent(target)
		for _, r := range group {
			switch {
			case r.Target == nil:
			case r.Target.Limit == nil:
				p.Fits = append(p.Fits, r.Algorithm+": none up to 16× the policy's limit")
			default:
				p.Fits = append(p.Fits, r.Algorithm+": "+limitText(*r.Target.Limit)+" ("+
					strconv.FormatFloat(r.Target.DeniedKeyShare*100, 'f', 2, 64)+"% of keys denied)")
			}
		}
		p.Ladder = ladderChart(group, target, colours)
	}
	return p
}

var htmlPage = template.Must(template.New("page").Parse(htmlPageText))

// htmlPageText is well-formed XML as well as HTML (void elements closed,
// no named entities), which is how the tests read it.
const htmlPageText = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8"/>
<meta name="viewport" content="width=device-width, initial-scale=1"/>
<title>Sluice replay</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222; line-height: 1.4; max-width: 1300px; margin: 2em auto; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.3em; }
h2 { margin-top: 2em; padding-bottom: 0.2em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1em; color: #444; margin: 1.5em 0 0.3em; }
dl.meta { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; margin: 0.5em 0; }
dl.meta dt { font-weight: 600; }
dl.meta dd { margin: 0; }
.limit, .note { color: #555; font-style: italic; }
.tablewrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { padding: 0.3em 0.6em; border-bottom: 1px solid #e4e4e4; white-space: nowrap; }
th { background: #f4f4f4; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.own td { font-weight: 600; }
.pair { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 0.5em 1.5em; align-items: start; }
svg.chart { display: block; width: 100%; max-width: 900px; height: auto; font-size: 12px; }
svg.chart text { fill: #333; }
svg.chart .grid { stroke: #e6e6e6; stroke-width: 1; }
svg.chart .axis { stroke: #888; stroke-width: 1; }
svg.chart .tick { text-anchor: middle; fill: #666; }
svg.chart .ytick, svg.chart .label, svg.chart .rule { text-anchor: end; }
svg.chart .ytick { fill: #666; }
svg.chart .title { text-anchor: middle; fill: #555; }
</style>
</head>
<body>
<h1>Sluice replay</h1>
<dl class="meta">
{{range .Summary}}<dt>{{.Name}}</dt><dd>{{.Value}}</dd>
{{end}}</dl>
{{if .Skipped}}<ul class="skipped">
{{range .Skipped}}<li>{{.}}</li>
{{end}}{{if .SkippedMore}}<li class="note">… {{.SkippedMore}}</li>
{{end}}</ul>
{{end}}
{{- if .Policies}}<nav><ul>
{{range .Policies}}<li><a href="#{{.ID}}">{{.Name}}</a></li>
{{end}}</ul></nav>
{{else}}<p class="note">No results.</p>
{{end}}
{{- range .Policies}}
<section id="{{.ID}}">
<h2>Policy {{.Name}}</h2>
<p class="limit">{{.Limit}}; * its own algorithm, the others at the same limit</p>
<div class="tablewrap"><table>
<thead><tr>{{range .Columns}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>
{{range .Rows}}<tr{{if .Own}} class="own"{{end}}>{{range $i, $c := .Cells}}{{if eq $i 0}}<td>{{$c}}</td>{{else}}<td class="num">{{$c}}</td>{{end}}{{end}}</tr>
{{end}}</tbody>
</table></div>
{{range .Notes}}<p class="note">{{.}}</p>
{{end}}
{{- range .Algorithms}}<h3>{{.Name}}{{if .Own}} (its own algorithm){{end}}</h3>
<div class="pair">
{{template "line" .Timeline}}{{with .Keys}}{{template "bars" .}}{{else}}<p class="note">No key denied.</p>
{{end}}</div>
{{end}}
{{- if .Target}}<h3>Smallest limit denying at most {{.Target}} of keys</h3>
<ul>
{{range .Fits}}<li>{{.}}</li>
{{end}}</ul>
{{with .Ladder}}{{template "line" .}}{{end}}
{{- end}}</section>
{{end}}
<footer><p class="note">Generated by sluice replay.</p></footer>
</body>
</html>
{{define "line"}}<svg class="{{.Class}}" viewBox="{{.ViewBox}}" role="img" aria-label="{{.Label}}">
{{range .XTicks}}<line class="grid" x1="{{.X1}}" y1="{{.Y1}}" x2="{{.X2}}" y2="{{.Y2}}"/><text class="tick" x="{{.TX}}" y="{{.TY}}">{{.Label}}</text>
{{end}}{{range .YTicks}}<line class="grid" x1="{{.X1}}" y1="{{.Y1}}" x2="{{.X2}}" y2="{{.Y2}}"/><text class="ytick" x="{{.TX}}" y="{{.TY}}">{{.Label}}</text>
{{end}}<line class="axis" x1="{{.Left}}" y1="{{.Bottom}}" x2="{{.Right}}" y2="{{.Bottom}}"/>
<line class="axis" x1="{{.Left}}" y1="{{.Top}}" x2="{{.Left}}" y2="{{.Bottom}}"/>
<text class="title" x="{{.XTitleX}}" y="{{.XTitleY}}">{{.XTitle}}</text>
<text class="title" transform="translate({{.YTitleX}} {{.YTitleY}}) rotate(-90)">{{.YTitle}}</text>
{{with .Rule}}<line x1="{{.X1}}" y1="{{.Y1}}" x2="{{.X2}}" y2="{{.Y2}}" stroke="` + colourTarget + `" stroke-width="1" stroke-dasharray="6 4"/><text class="rule" x="{{.TX}}" y="{{.TY}}">{{.Label}}</text>
{{end}}{{range .Lines}}<polyline fill="none" stroke="{{.Colour}}" stroke-width="2" stroke-linejoin="round" points="{{.Points}}"><title>{{.Name}}</title></polyline>
{{end}}{{range .Marks}}<circle cx="{{.X}}" cy="{{.Y}}" r="4.5" fill="{{.Colour}}" stroke="#fff" stroke-width="1.5"><title>{{.Title}}</title></circle>
{{end}}{{range .Legend}}<line x1="{{.X1}}" y1="{{.Y}}" x2="{{.X2}}" y2="{{.Y}}" stroke="{{.Colour}}" stroke-width="3"/><text x="{{.TX}}" y="{{.TY}}"><title>{{.Full}}</title>{{.Label}}</text>
{{end}}{{if .Empty}}<text class="title" x="{{.EmptyX}}" y="{{.EmptyY}}">{{.Empty}}</text>
{{end}}</svg>
{{end}}
{{define "bars"}}<svg class="chart keys" viewBox="{{.ViewBox}}" role="img" aria-label="{{.Label}}">
{{range .Legend}}<line x1="{{.X1}}" y1="{{.Y}}" x2="{{.X2}}" y2="{{.Y}}" stroke="{{.Colour}}" stroke-width="8"/><text x="{{.TX}}" y="{{.TY}}"><title>{{.Full}}</title>{{.Label}}</text>
{{end}}{{range .XTicks}}<line class="grid" x1="{{.X1}}" y1="{{.Y1}}" x2="{{.X2}}" y2="{{.Y2}}"/><text class="tick" x="{{.TX}}" y="{{.TY}}">{{.Label}}</text>
{{end}}{{range .Bars}}<text class="label" x="{{.LX}}" y="{{.LY}}"><title>{{.Full}}</title>{{.Label}}</text><rect x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}" fill="{{.Colour}}"><title>{{.Title}}</title></rect><text x="{{.TX}}" y="{{.TY}}">{{.Text}}</text>
{{end}}<line class="axis" x1="{{.Left}}" y1="{{.Top}}" x2="{{.Left}}" y2="{{.Bottom}}"/>
<text class="title" x="{{.XTX}}" y="{{.XTitleY}}">{{.XTitle}}</text>
</svg>
{{end}}`
