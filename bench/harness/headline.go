package harness

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Headline is the comparison the README quotes: in each throughput
// scenario, Sluice's token bucket (coalesced) against go-redis/redis_rate
// and ulule/limiter on the same Redis, in decisions per second and Redis
// CPU per decision, and the token bucket with a lease against
// x/time/rate in process.
type Headline struct {
	Scenario string         `json:"scenario"`
	Rows     []HeadlineLine `json:"rows"`
}

// HeadlineLine is one comparison: Subject's figure over Other's.
type HeadlineLine struct {
	Subject string `json:"subject"`
	Other   string `json:"other"`
	// Label names the comparison in a few words, for charts and tables.
	Label string `json:"label"`
	// DecisionsRatio is Subject's decisions per second over Other's.
	DecisionsRatio float64 `json:"decisions_ratio"`
	// ServerMicrosRatio is Subject's Redis CPU per decision over
	// Other's; 0 when not measured (the embedded store, an in-process
	// subject).
	ServerMicrosRatio float64 `json:"server_us_ratio,omitempty"`
	SubjectDecisions  float64 `json:"subject_decisions_per_second"`
	OtherDecisions    float64 `json:"other_decisions_per_second"`
	// DecisionsRatioRange and ServerMicrosRatioRange are the smallest and
	// largest of the ratios round by round (each round runs both subjects
	// one after the other), when the scenario ran in rounds; nil
	// otherwise.
	DecisionsRatioRange    *[2]float64 `json:"decisions_ratio_range,omitempty"`
	ServerMicrosRatioRange *[2]float64 `json:"server_us_ratio_range,omitempty"`
}

// roundRatios returns the range of a's figure over b's, round by round,
// or nil when they did not run in the same rounds or a figure is missing.
func roundRatios(a, b Result, figure func(Round) float64) *[2]float64 {
	if len(a.Rounds) < 2 || len(a.Rounds) != len(b.Rounds) {
		return nil
	}
	var lo, hi float64
	for i := range a.Rounds {
		x, y := figure(a.Rounds[i]), figure(b.Rounds[i])
		if a.Rounds[i].Error != "" || b.Rounds[i].Error != "" || x <= 0 || y <= 0 {
			return nil
		}
		q := x / y
		if i == 0 || q < lo {
			lo = q
		}
		if i == 0 || q > hi {
			hi = q
		}
	}
	return &[2]float64{lo, hi}
}

// headlinePairs are the comparisons, subject over other, each with a
// label short enough for a chart.
var headlinePairs = []struct{ subject, other, label string }{
	{"sluice/tokenbucket+coalesce", "go-redis/redis_rate (GCRA)", "coalesced vs redis_rate"},
	{"sluice/tokenbucket+coalesce", "ulule/limiter (fixed window)", "coalesced vs ulule/limiter"},
	{"sluice/tokenbucket", "go-redis/redis_rate (GCRA)", "uncoalesced vs redis_rate"},
	{"sluice/tokenbucket+lease(B=100)", "x/time/rate (in process)", "lease B=100 vs x/time/rate"},
}

// HeadlineOf computes the headline from a report's throughput results;
// pairs with a missing or failed subject are left out.
func HeadlineOf(r Report) []Headline {
	var out []Headline
	byScenario := map[string]map[string]Result{}
	var order []string
	for _, res := range r.Results {
		if !strings.HasPrefix(res.Scenario, "throughput:") {
			continue
		}
		if byScenario[res.Scenario] == nil {
			byScenario[res.Scenario] = map[string]Result{}
			order = append(order, res.Scenario)
		}
		byScenario[res.Scenario][res.Subject] = res
	}
	for _, sc := range order {
		h := Headline{Scenario: sc}
		for _, pair := range headlinePairs {
			a, okA := byScenario[sc][pair.subject]
			b, okB := byScenario[sc][pair.other]
			if !okA || !okB || a.Error != "" || b.Error != "" || a.DecisionsPerSecond <= 0 || b.DecisionsPerSecond <= 0 {
				continue
			}
			line := HeadlineLine{Subject: pair.subject, Other: pair.other, Label: pair.label, DecisionsRatio: a.DecisionsPerSecond / b.DecisionsPerSecond,
				SubjectDecisions: a.DecisionsPerSecond, OtherDecisions: b.DecisionsPerSecond}
			line.DecisionsRatioRange = roundRatios(a, b, func(r Round) float64 { return r.DecisionsPerSecond })
			if a.ServerMicrosPerDecision > 0 && b.ServerMicrosPerDecision > 0 {
				line.ServerMicrosRatio = a.ServerMicrosPerDecision / b.ServerMicrosPerDecision
				line.ServerMicrosRatioRange = roundRatios(a, b, func(r Round) float64 { return r.ServerMicrosPerDecision })
			}
			h.Rows = append(h.Rows, line)
		}
		if len(h.Rows) > 0 {
			out = append(out, h)
		}
	}
	return out
}

// WriteHeadline prints the headline comparison.
func WriteHeadline(w io.Writer, r Report) error {
	hs := HeadlineOf(r)
	if len(hs) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n== headline (%s) ==\n", r.Redis)
	if !r.Representative {
		b.WriteString("(the embedded store runs in process: ratios of Redis-backed subjects say little about a real Redis; use --redis auto)\n")
	}
	for _, h := range hs {
		fmt.Fprintf(&b, "%s\n", h.Scenario)
		for _, l := range h.Rows {
			cpu := "Redis CPU per decision not measured"
			if l.ServerMicrosRatio > 0 {
				cpu = fmt.Sprintf("%.2f ×%s the Redis CPU per decision", l.ServerMicrosRatio, RangeText(l.ServerMicrosRatioRange))
			}
			fmt.Fprintf(&b, "  %-34s %5.2f ×%s the decisions/s of %-30s (%s vs %s/s); %s\n", l.Subject, l.DecisionsRatio, RangeText(l.DecisionsRatioRange), l.Other,
				thousands(l.SubjectDecisions), thousands(l.OtherDecisions), cpu)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// RangeText prints a ratio's range over rounds as " [lo–hi]", or
// nothing without one.
func RangeText(r *[2]float64) string {
	if r == nil {
		return ""
	}
	return fmt.Sprintf(" [%.2f–%.2f]", r[0], r[1])
}

func thousands(v float64) string { return outThousands(int64(math.Round(v))) }
