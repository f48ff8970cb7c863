package harness

import (
	"bytes"
	"slices"
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
