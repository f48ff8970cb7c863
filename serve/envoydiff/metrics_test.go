//go:build unix

package envoydiff_test

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// series maps a Prometheus series ("name{label=\"value\",...}") to its
// value.
type series map[string]float64

// scrape reads s's metrics (USE_PROMETHEUS=true, at PROMETHEUS_ADDR) and
// returns the series whose name has one of the prefixes, zero values left
// out: envoyproxy/ratelimit never exports a counter that is still zero
// (gostats flushes only counters that moved), so absent and 0 are the
// same answer.
func (s *service) scrape(t *testing.T, prefixes ...string) series {
	t.Helper()
	out := series{}
	for name, x := range s.exposition(t, prefixes...) {
		if x.v != 0 {
			out[name] = x.v
		}
	}
	return out
}

// sample is a series' type, as the text format's TYPE line declares its
// family (counter, gauge...), and its value.
type sample struct {
	typ string
	v   float64
}

// exposition reads s's metrics and returns every series whose name has
// one of the prefixes, with its type and value.
func (s *service) exposition(t *testing.T, prefixes ...string) map[string]sample {
	t.Helper()
	code, body, err := httpDo(http.MethodGet, s.metricsURL, "")
	if err != nil || code != http.StatusOK {
		t.Fatalf("%s: GET %s: %d %v", s.name, s.metricsURL, code, err)
	}
	types := map[string]string{}
	out := map[string]sample{}
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			if name, typ, ok := strings.Cut(rest, " "); ok {
				types[name] = typ
			}
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		name, value := line[:i], line[i+1:]
		keep := false
		for _, p := range prefixes {
			keep = keep || strings.HasPrefix(name, p)
		}
		if !keep {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("%s: metric line %q: %v", s.name, line, err)
		}
		family, _, _ := strings.Cut(name, "{")
		out[name] = sample{types[family], v}
	}
	return out
}

func (m series) String() string {
	var lines []string
	for k, v := range m {
		lines = append(lines, fmt.Sprintf("  %s %g", k, v))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func (m series) equal(o series) bool {
	if len(m) != len(o) {
		return false
	}
	for k, v := range m {
		if w, ok := o[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// decisionMetrics are the per-rule counters, for a domain.
func decisionMetrics(domain string) []string {
	var out []string
	for _, c := range []string{"total_hits", "over_limit", "near_limit", "within_limit", "shadow_mode"} {
		out = append(out, fmt.Sprintf("ratelimit_service_rate_limit_%s{domain=%q", c, domain))
	}
	return out
}

// metricsAre waits up to 15 s until theirs exposes want among the series
// of prefixes (envoyproxy/ratelimit flushes its counters every
// STATS_FLUSH_INTERVAL), then until ours exposes the same.
func (p *pair) metricsAre(t *testing.T, want series, prefixes ...string) {
	t.Helper()
	for _, s := range p.both() {
		deadline := time.Now().Add(15 * time.Second)
		for {
			got := s.scrape(t, prefixes...)
			if got.equal(want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's metrics %v are:\n%v\nthe case expects:\n%v", s.name, prefixes, got, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// flushed returns once envoyproxy/ratelimit has flushed its counters to
// its Prometheus exporter since the call: its stats store flushes every
// STATS_FLUSH_INTERVAL, counters first, then every gauge, so a flush that
// began after the call shows as the exporter's count of gauge events
// moving at three polls 50 ms apart (one flush's events arrive together).
func (s *service) flushed(t *testing.T) {
	t.Helper()
	const gaugeEvents = `statsd_exporter_events_total{type="gauge"}`
	deadline := time.Now().Add(15 * time.Second)
	last, moves := s.scrape(t, gaugeEvents)[gaugeEvents], 0
	for moves < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not flush its stats within 15 s", s.name)
		}
		time.Sleep(50 * time.Millisecond)
		if v := s.scrape(t, gaugeEvents)[gaugeEvents]; v != last {
			last, moves = v, moves+1
		}
	}
}

// sameMetrics fails t unless theirs, once flushed, and ours expose the
// same series of prefixes.
func (p *pair) sameMetrics(t *testing.T, prefixes ...string) {
	t.Helper()
	p.theirs.flushed(t)
	theirs, ours := p.theirs.scrape(t, prefixes...), p.ours.scrape(t, prefixes...)
	if !theirs.equal(ours) {
		t.Fatalf("the metrics %v differ:\ntheirs:\n%v\nours:\n%v", prefixes, theirs, ours)
	}
}
