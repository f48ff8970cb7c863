package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// serveRunNote is the note holding the serve scenarios' runs that compare
// sluice-serve's compatible mode with envoyproxy/ratelimit itself.
const serveRunNote = "bench/runs/serve-envoyproxy.md"

// serveRunTable renders the markdown table the note quotes for a run of
// the serve scenarios: per scenario and subject, decisions per second
// (with the range over the rounds), latency percentiles and the Redis
// cost, from the run's JSON.
func serveRunTable(r Report) string {
	var b strings.Builder
	b.WriteString("| callers | subject | decisions/s | rounds' decisions/s | p50 / p99 / p99.9 µs | Redis calls per decision | Redis server µs per decision |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, res := range r.Results {
		callers := "?"
		switch res.Scenario {
		case scenarioServeOne:
			callers = "1"
		case scenarioServeMany:
			callers = "32"
		}
		lo, hi := res.DecisionsPerSecond, res.DecisionsPerSecond
		for _, round := range res.Rounds {
			lo, hi = min(lo, round.DecisionsPerSecond), max(hi, round.DecisionsPerSecond)
		}
		subject := res.Subject
		if subject == ServeEnvoyProxy || subject == ServeEnvoyCompat {
			subject = "**" + subject + "**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s – %s | %s / %s / %s | %s | %s |\n", callers, subject,
			docsRate(res.DecisionsPerSecond), docsRate(lo), docsRate(hi),
			outMicros(res.LatencyMicros.P50), outMicros(res.LatencyMicros.P99), outMicros(res.LatencyMicros.P999),
			docsMeasured(res.RedisCallsPerDecision, docsCalls, true), docsMeasured(res.ServerMicrosPerDecision, outMicros, true))
	}
	return b.String()
}

// TestServeRunNoteQuotesItsRuns: every run the note names (a
// bench/runs/*.json between backquotes, after "From") is a run of the
// serve scenarios on a real redis-server in which both
// envoyproxy/ratelimit and sluice-serve's compatible mode decided without
// error, and the note holds exactly the table serveRunTable renders from
// it.
func TestServeRunNoteQuotesItsRuns(t *testing.T) {
	root := filepath.Join("..", "..")
	note, err := os.ReadFile(filepath.Join(root, serveRunNote))
	require.NoError(t, err)
	var runs []string
	for line := range strings.SplitSeq(string(note), "\n") {
		if rest, ok := strings.CutPrefix(line, "From `"); ok {
			name, _, _ := strings.Cut(rest, "`")
			runs = append(runs, name)
		}
	}
	require.NotEmpty(t, runs, "the note names its runs")
	for _, name := range runs {
		require.True(t, strings.HasPrefix(name, "bench/runs/") && strings.HasSuffix(name, ".json"), name)
		data, err := os.ReadFile(filepath.Join(root, name))
		require.NoError(t, err)
		var r Report
		require.NoError(t, json.Unmarshal(data, &r), name)
		require.True(t, r.Representative, "%s: a run on a real redis-server", name)
		seen := map[string]int{}
		for _, res := range r.Results {
			require.Contains(t, []string{scenarioServeOne, scenarioServeMany}, res.Scenario, name)
			if res.Subject == ServeEnvoyProxy || res.Subject == ServeEnvoyCompat {
				require.Empty(t, res.Error, "%s: %s", name, res.Subject)
				require.Positive(t, res.DecisionsPerSecond, "%s: %s", name, res.Subject)
				seen[res.Subject]++
			}
		}
		require.Equal(t, map[string]int{ServeEnvoyProxy: 2, ServeEnvoyCompat: 2}, seen, "%s: both services in both scenarios", name)
		table := serveRunTable(r)
		require.True(t, strings.Contains(string(note), "From `"+name+"`") && strings.Contains(string(note), table),
			"%s does not quote the table %s renders:\n%s", serveRunNote, name, table)
	}
}
