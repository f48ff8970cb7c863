package harness

import (
	"fmt"
	"io"
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
			if a.ServerMicrosPerDecision > 0 && b.ServerMicrosPerDecision > 0 {
				line.ServerMicrosRatio = a.ServerMicrosPerDecision / b.ServerMicrosPerDecision
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
				cpu = fmt.Sprintf("%.2f × the Redis CPU per decision", l.ServerMicrosRatio)
			}
			fmt.Fprintf(&b, "  %-34s %5.2f × the decisions/s of %-30s (%s vs %s/s); %s\n", l.Subject, l.DecisionsRatio, l.Other,
				thousands(l.SubjectDecisions), thousands(l.OtherDecisions), cpu)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var out []byte
	for i, c := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, c)
	}
	return string(out)
}
