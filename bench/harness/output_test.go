package harness

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const outEvilSubject = `evil<script>alert("x")</script>`

// outSampleReport is 2 scenarios × 3 subjects with an unmeasured cost, an
// error and a subject name that must be escaped.
func outSampleReport(representative bool) Report {
	tenths := func(step int64) []int64 {
		s := make([]int64, 10)
		for i := range s {
			s[i] = step * int64(i+1)
		}
		return s
	}
	return Report{
		Started:        time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC),
		Redis:          "embedded (miniredis)",
		Representative: representative,
		Machine:        "linux/amd64, 8 CPUs",
		Results: []Result{
			{
				Scenario: "steady", Subject: "sluice/gcra", Limit: "100/s burst 100",
				Requests: 2000, Admitted: 1000, Ideal: 1000, WorstWindow: 1.01,
				DecisionsPerSecond: 18234.5, LatencyMicros: Latency{P50: 48.2, P99: 131.7, P999: 402.9},
				RedisCallsPerDecision: 1, ServerMicrosPerDecision: 4.25,
				AdmittedOverTime: tenths(100), IdealOverTime: tenths(100),
			},
			{
				Scenario: "steady", Subject: "x/time/rate (in-process)", Limit: "100/s burst 100",
				Requests: 2000, Admitted: 1003, Ideal: 1000, WorstWindow: 1.02,
				DecisionsPerSecond: 4.2e6, LatencyMicros: Latency{P50: 0.08, P99: 0.3, P999: 1.2},
				RedisCallsPerDecision: -1, ServerMicrosPerDecision: -1,
				AdmittedOverTime: tenths(101), IdealOverTime: tenths(100),
			},
			{
				Scenario: "steady", Subject: outEvilSubject, Limit: "100/s burst 100",
				Requests: 2000, Admitted: 1400, Ideal: 1000, WorstWindow: 1.98,
				DecisionsPerSecond: 9000, LatencyMicros: Latency{P50: 60, P99: 250, P999: 1100},
				RedisCallsPerDecision: 2.5, ServerMicrosPerDecision: 9.75,
				AdmittedOverTime: tenths(140), IdealOverTime: tenths(100),
			},
			{
				Scenario: "boundary attack", Subject: "sluice/gcra", Limit: "100/s burst 100",
				Requests: 400, Admitted: 100, Ideal: 100, WorstWindow: 1,
				DecisionsPerSecond: 17000, LatencyMicros: Latency{P50: 50, P99: 140, P999: 390},
				RedisCallsPerDecision: 1, ServerMicrosPerDecision: 4.5,
				AdmittedOverTime: []int64{0, 0, 0, 0, 100, 100, 100, 100, 100, 100},
				IdealOverTime:    []int64{0, 0, 0, 0, 100, 100, 100, 100, 100, 100},
			},
			{
				Scenario: "boundary attack", Subject: "x/time/rate (in-process)", Limit: "100/s burst 100",
				Requests: 400, Admitted: 100, Ideal: 100, WorstWindow: 1,
				DecisionsPerSecond: 3.9e6, LatencyMicros: Latency{P50: 0.07, P99: 0.25, P999: 0.9},
				RedisCallsPerDecision: -1, ServerMicrosPerDecision: -1,
				AdmittedOverTime: []int64{0, 0, 0, 0, 100, 100, 100, 100, 100, 100},
				IdealOverTime:    []int64{0, 0, 0, 0, 100, 100, 100, 100, 100, 100},
			},
			{
				Scenario: "boundary attack", Subject: outEvilSubject, Limit: "100/s burst 100",
				Requests: 0, RedisCallsPerDecision: -1, ServerMicrosPerDecision: -1,
				Error: "dial tcp 127.0.0.1:6379: connect: connection refused",
			},
		},
	}
}

func TestOutputTable(t *testing.T) {
	r := outSampleReport(false)
	var b bytes.Buffer
	require.NoError(t, WriteTable(&b, r))
	out := b.String()

	require.Contains(t, out, "embedded (miniredis)")
	require.Contains(t, out, "linux/amd64, 8 CPUs")
	require.Contains(t, out, "2025-03-14 15:09:26 UTC")
	require.Contains(t, out, "latencies from the embedded store are NOT representative of a real Redis")
	require.Contains(t, out, "== steady ==")
	require.Contains(t, out, "== boundary attack ==")
	for _, res := range r.Results {
		require.Contains(t, out, res.Subject)
	}
	require.Contains(t, out, "connection refused")
	require.Contains(t, out, "140.0%")    // admitted/ideal
	require.Contains(t, out, "1.98")      // worst window, 2 decimals
	require.Contains(t, out, "18,235")    // decisions/s
	require.Contains(t, out, "131.7")     // p99
	require.Contains(t, out, "2.50")      // Redis calls per decision
	require.Contains(t, out, "9.75")      // server µs per decision
	require.Contains(t, out, "4,200,000") // in-process decisions/s

	// The in-process row shows "-" for both unmeasured costs.
	var inProcess string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "x/time/rate") {
			inProcess = line
			break
		}
	}
	require.NotEmpty(t, inProcess)
	require.Len(t, strings.Fields(inProcess), 2+11, "subject is two words, then eleven cells; the error cell is empty")
	require.Equal(t, []string{"-", "-", "-"}, strings.Fields(inProcess)[10:13], "calls, server time and memory unmeasured")

	// Columns line up: every row of a table starts its second column at
	// the same place as the header's "admitted".
	lines := strings.Split(out, "\n")
	for i, line := range lines {
		if !strings.HasPrefix(line, "subject") {
			continue
		}
		col := strings.Index(line, "admitted")
		for _, row := range lines[i+1 : i+4] {
			require.NotEqual(t, byte(' '), row[col], "row %q", row)
			require.Equal(t, byte(' '), row[col-1], "row %q", row)
		}
	}

	for _, line := range lines {
		require.Equal(t, strings.TrimRight(line, " "), line, "no trailing spaces")
	}

	b.Reset()
	require.NoError(t, WriteTable(&b, outSampleReport(true)))
	require.NotContains(t, b.String(), "NOT representative")
}

type outFailWriter struct{}

func (outFailWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestOutputWriteErrors(t *testing.T) {
	r := outSampleReport(false)
	require.Error(t, WriteTable(outFailWriter{}, r))
	require.Error(t, WriteJSON(outFailWriter{}, r))
	require.Error(t, WriteHTML(outFailWriter{}, r))
}

func TestOutputJSONRoundTrip(t *testing.T) {
	in := outSampleReport(false)
	var b bytes.Buffer
	require.NoError(t, WriteJSON(&b, in))
	require.Contains(t, b.String(), "\n  \"redis\": ", "indented")

	var out Report
	require.NoError(t, json.Unmarshal(b.Bytes(), &out))
	require.Equal(t, in, out)
}

func TestOutputHTML(t *testing.T) {
	r := outSampleReport(false)
	var b bytes.Buffer
	require.NoError(t, WriteHTML(&b, r))
	page := b.String()

	if path := os.Getenv("SLUICE_BENCH_SAMPLE_HTML"); path != "" {
		require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
	}

	require.True(t, strings.HasPrefix(page, "<!DOCTYPE html>"))
	require.Contains(t, page, "<svg")
	require.Contains(t, page, "<polyline")
	require.Contains(t, page, "NOT representative of a real Redis")
	require.Contains(t, page, "&lt;script&gt;")
	lower := strings.ToLower(page)
	require.NotContains(t, lower, "<script")
	for _, external := range []string{"http://", "https://", "<link", "<img", "<iframe", "@import", "url("} {
		require.NotContains(t, lower, external)
	}
	for _, res := range r.Results {
		if !strings.Contains(res.Subject, "<") {
			require.Contains(t, page, res.Subject)
		}
	}

	// The page is well-formed XML as well as HTML: walk it with a strict
	// decoder, which checks every tag is closed in order, and count the
	// charts.
	type chart struct {
		class     string
		polylines int
		dashed    int
		rects     int
	}
	var charts []*chart
	var cur *chart
	dec := xml.NewDecoder(&b)
	depth := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		switch el := tok.(type) {
		case xml.StartElement:
			depth++
			attr := map[string]string{}
			for _, a := range el.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch el.Name.Local {
			case "svg":
				require.Nil(t, cur, "nested svg")
				require.NotEmpty(t, attr["viewBox"])
				cur = &chart{class: attr["class"]}
				charts = append(charts, cur)
			case "polyline":
				require.NotNil(t, cur)
				cur.polylines++
				if attr["stroke-dasharray"] != "" {
					cur.dashed++
				}
			case "rect":
				if cur != nil {
					cur.rects++
				}
			}
		case xml.EndElement:
			depth--
			if el.Name.Local == "svg" {
				cur = nil
			}
		}
	}
	require.Zero(t, depth)

	var admitted, bars []*chart
	for _, c := range charts {
		switch c.class {
		case "chart admitted":
			admitted = append(admitted, c)
		case "chart bars":
			bars = append(bars, c)
		}
	}
	require.Len(t, admitted, 2, "one admitted-over-time chart per scenario")
	// steady: three subjects and the ideal; boundary attack: the failed
	// subject has no series.
	require.Equal(t, 4, admitted[0].polylines)
	require.Equal(t, 3, admitted[1].polylines)
	for _, c := range admitted {
		require.Equal(t, 1, c.dashed, "the ideal is the one dashed line")
	}
	// Per scenario a latency chart and, for the measured subjects, a cost
	// chart.
	require.Len(t, bars, 4)
	require.Equal(t, 2+3*2, bars[0].rects, "latency: legend, then p50 and p99 of three subjects")
	require.Equal(t, 2, bars[1].rects, "cost: two measured subjects")
	require.Equal(t, 2+2*2, bars[2].rects, "latency: the failed subject has none")
	require.Equal(t, 1, bars[3].rects, "cost: one measured subject")
}

func TestOutputEmptyReport(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteTable(&b, Report{}))
	require.Contains(t, b.String(), "no results")
	b.Reset()
	require.NoError(t, WriteHTML(&b, Report{Representative: true}))
	require.Contains(t, b.String(), "No results.")
	require.NotContains(t, b.String(), "NOT representative")
}

func TestOutputNiceScale(t *testing.T) {
	for _, c := range []struct{ max, top, step float64 }{
		{0, 1, 0.2},
		{1000, 1000, 200},
		{1400, 1500, 500},
		{7, 8, 2},
		{0.3, 0.3, 0.1},
	} {
		top, step := outNiceScale(c.max)
		require.InDelta(t, c.top, top, 1e-9, "max %v", c.max)
		require.InDelta(t, c.step, step, 1e-9, "max %v", c.max)
	}
	require.Equal(t, "1,234,567", outThousands(1234567))
	require.Equal(t, "-1,000", outThousands(-1000))
	require.Equal(t, "999", outThousands(999))
	require.Equal(t, "1.5k", outCompact(1500))
	require.Equal(t, "2M", outCompact(2e6))
}
