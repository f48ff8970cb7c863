package harness

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestQuickSetExists: every name of the quick set is a scenario or subject
// that exists, so that `sluice bench` with no flags runs what the headline
// needs.
func TestQuickSetExists(t *testing.T) {
	var scenarios, subjects []string
	for _, s := range Scenarios() {
		scenarios = append(scenarios, s.Name)
	}
	for _, s := range Subjects() {
		subjects = append(subjects, s.Name)
	}
	for _, name := range QuickScenarios {
		require.True(t, slices.Contains(scenarios, name), name)
	}
	for _, name := range QuickSubjects {
		require.True(t, slices.Contains(subjects, name), name)
	}
	for _, pair := range headlinePairs {
		require.True(t, slices.Contains(QuickSubjects, pair.subject) && slices.Contains(QuickSubjects, pair.other), pair.label)
	}
}

// TestHeadline: the ratios come from the throughput results, Redis CPU
// only where measured, and a failed subject drops its lines.
func TestHeadline(t *testing.T) {
	r := Report{Redis: "redis-server 7 at x", Representative: true, Results: []Result{
		{Scenario: "throughput: one hot key", Subject: "sluice/tokenbucket+coalesce", DecisionsPerSecond: 300, ServerMicrosPerDecision: 2},
		{Scenario: "throughput: one hot key", Subject: "go-redis/redis_rate (GCRA)", DecisionsPerSecond: 100, ServerMicrosPerDecision: 8},
		{Scenario: "throughput: one hot key", Subject: "ulule/limiter (fixed window)", DecisionsPerSecond: 150, Error: "boom"},
		{Scenario: "burst after idle", Subject: "sluice/tokenbucket+coalesce", DecisionsPerSecond: 1},
	}}
	hs := HeadlineOf(r)
	require.Len(t, hs, 1)
	require.Equal(t, []HeadlineLine{{Subject: "sluice/tokenbucket+coalesce", Other: "go-redis/redis_rate (GCRA)", Label: "coalesced vs redis_rate",
		DecisionsRatio: 3, ServerMicrosRatio: 0.25, SubjectDecisions: 300, OtherDecisions: 100}}, hs[0].Rows)
	var b bytes.Buffer
	require.NoError(t, WriteHeadline(&b, r))
	require.Contains(t, b.String(), "3.00 × the decisions/s of go-redis/redis_rate (GCRA)")
	require.Contains(t, b.String(), "0.25 × the Redis CPU per decision")
}

// TestRounds: a throughput scenario run in rounds gives one result per
// subject whose figures are the rounds' together, and a headline ratio
// with its range round by round; Planned counts every round.
func TestRounds(t *testing.T) {
	rounds := []Result{
		{Scenario: "throughput: x", Subject: "a", Requests: 100, Admitted: 100, Ideal: 100, DecisionsPerSecond: 100, RedisCallsPerDecision: 4, ServerMicrosPerDecision: 2,
			LatencyMicros: Latency{P50: 1, P99: 10, P999: 20}, WorstWindow: 0.5, AdmittedOverTime: []int64{50, 100}, IdealOverTime: []int64{50, 100}},
		{Scenario: "throughput: x", Subject: "a", Requests: 300, Admitted: 300, Ideal: 300, DecisionsPerSecond: 300, RedisCallsPerDecision: 4, ServerMicrosPerDecision: 4,
			LatencyMicros: Latency{P50: 3, P99: 30, P999: 60}, WorstWindow: 1.5, AdmittedOverTime: []int64{150, 300}, IdealOverTime: []int64{150, 300}},
		{Scenario: "throughput: x", Subject: "a", Requests: 200, Admitted: 200, Ideal: 200, DecisionsPerSecond: 200, RedisCallsPerDecision: 4, ServerMicrosPerDecision: 3,
			LatencyMicros: Latency{P50: 2, P99: 20, P999: 40}, WorstWindow: 1, AdmittedOverTime: []int64{100, 200}, IdealOverTime: []int64{100, 200}, Error: "boom"},
	}
	m := mergeRounds(rounds)
	require.EqualValues(t, 600, m.Requests)
	require.EqualValues(t, 600, m.Admitted)
	require.InDelta(t, 200, m.DecisionsPerSecond, 1e-9, "600 decisions over 3 s")
	require.InDelta(t, 4, m.RedisCallsPerDecision, 1e-9)
	require.InDelta(t, (100*2+300*4+200*3)/600.0, m.ServerMicrosPerDecision, 1e-9, "weighted by decisions")
	require.Equal(t, Latency{P50: 2, P99: 20, P999: 40}, m.LatencyMicros, "the rounds' medians")
	require.InDelta(t, 1.5, m.WorstWindow, 1e-9)
	require.Equal(t, []int64{300, 600}, m.AdmittedOverTime)
	require.Equal(t, "round 3 of 3: boom", m.Error)
	require.Len(t, m.Rounds, 3)
	require.Equal(t, rounds[:1], []Result{mergeRounds(rounds[:1])}, "one round is itself")

	a := Result{Rounds: []Round{{DecisionsPerSecond: 300}, {DecisionsPerSecond: 200}}}
	b := Result{Rounds: []Round{{DecisionsPerSecond: 100}, {DecisionsPerSecond: 100}}}
	require.Equal(t, &[2]float64{2, 3}, roundRatios(a, b, func(r Round) float64 { return r.DecisionsPerSecond }))
	require.Nil(t, roundRatios(a, Result{Rounds: b.Rounds[:1]}, func(r Round) float64 { return r.DecisionsPerSecond }), "different rounds")
	b.Rounds[1].Error = "x"
	require.Nil(t, roundRatios(a, b, func(r Round) float64 { return r.DecisionsPerSecond }), "a failed round")
	require.Equal(t, " [2.00–3.00]", RangeText(&[2]float64{2, 3}))
	require.Empty(t, RangeText(nil))

	var throughput, burst Scenario
	for _, s := range Scenarios() {
		switch {
		case strings.HasPrefix(s.Name, "throughput: one hot key"):
			throughput = s
		case strings.HasPrefix(s.Name, "burst"):
			burst = s
		}
	}
	subjects := []Subject{{Name: "a"}, {Name: "b"}, {Name: "PING", Baseline: true}}
	require.Equal(t, 3*3+2, Planned(Options{Rounds: 3, Scenarios: []Scenario{throughput, burst}, Subjects: subjects}),
		"3 rounds of 3 subjects in the throughput scenario, one of the 2 limiters in the burst")
}

// TestHeadlineChartDrawsTheRanges: in the HTML report, each headline bar
// of a scenario run in rounds carries a whisker over its round-by-round
// range, and a run without rounds has none.
func TestHeadlineChartDrawsTheRanges(t *testing.T) {
	sc := "throughput: one hot key, 128 goroutines, all allowed"
	rounds := func(dps, us float64) []Round {
		return []Round{{DecisionsPerSecond: dps, ServerMicrosPerDecision: us}, {DecisionsPerSecond: dps * 1.2, ServerMicrosPerDecision: us}}
	}
	r := Report{Representative: true, Results: []Result{
		{Scenario: sc, Subject: "sluice/tokenbucket+coalesce", DecisionsPerSecond: 300, ServerMicrosPerDecision: 2, Rounds: rounds(300, 2)},
		{Scenario: sc, Subject: "go-redis/redis_rate (GCRA)", DecisionsPerSecond: 100, ServerMicrosPerDecision: 8, Rounds: rounds(120, 8)},
	}}
	var b bytes.Buffer
	require.NoError(t, WriteHTML(&b, r))
	require.Equal(t, 2, strings.Count(b.String(), `<path class="range"`), "decisions/s and Redis CPU, one whisker each")

	for i := range r.Results {
		r.Results[i].Rounds = nil
	}
	b.Reset()
	require.NoError(t, WriteHTML(&b, r))
	require.NotContains(t, b.String(), `<path class="range"`)
	require.Contains(t, b.String(), `<section id="headline">`)
}
