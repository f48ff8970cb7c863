package harness

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestServeScenariosOnTheEmbeddedStore runs both serve scenarios briefly
// on the embedded store: every in-process subject decides (the direct
// calls, sluice serve in process and over gRPC), admits all it is asked
// under the scenarios' large limit, and each server states its overhead
// over its direct call, in the table too; the two process subjects
// (envoyproxy/ratelimit, sluice-serve's compatible mode) need a real
// redis-server and say so in the report instead of deciding.
func TestServeScenariosOnTheEmbeddedStore(t *testing.T) {
	client := embeddedClient(t)
	var scenarios []Scenario
	for _, s := range Scenarios() {
		if MatchesAny(s.Name, "serve") {
			scenarios = append(scenarios, s)
		}
	}
	require.Len(t, scenarios, 2, "--scenarios serve selects both serve scenarios")
	o := Options{Duration: 500 * time.Millisecond, Scenarios: scenarios, Subjects: Subjects(), Clients: Clients{GoRedis: client}}
	require.Equal(t, 14, Planned(o), "the serve scenarios run their own 7 subjects, not the common ones")
	results := Run(context.Background(), o)
	require.Len(t, results, 14)

	over := map[string]string{
		ServeInProcess:       ServeDirectTokenBucket,
		ServeGRPCTokenBucket: ServeDirectTokenBucket,
		ServeGRPCFixedWindow: ServeDirectFixedWindow,
	}
	for _, sc := range scenarios {
		seen := map[string]bool{}
		for _, r := range results {
			if r.Scenario != sc.Name {
				continue
			}
			seen[r.Subject] = true
			if r.Subject == ServeEnvoyProxy || r.Subject == ServeEnvoyCompat {
				require.Equal(t, errNoRedisServer.Error(), r.Error, r.Subject)
				require.Zero(t, r.Requests, r.Subject)
				require.Nil(t, r.Overhead, r.Subject)
				continue
			}
			require.Empty(t, r.Error, r.Subject)
			require.Positive(t, r.Requests, r.Subject)
			require.Equal(t, r.Requests, r.Admitted, "%s: the limit admits everything", r.Subject)
			require.Positive(t, r.DecisionsPerSecond, r.Subject)
			require.Positive(t, r.LatencyMicros.P50, r.Subject)
			if ref, ok := over[r.Subject]; ok {
				require.NotNil(t, r.Overhead, r.Subject)
				require.Equal(t, ref, r.Overhead.Over)
			} else {
				require.Nil(t, r.Overhead, r.Subject)
			}
		}
		for _, name := range []string{ServeDirectTokenBucket, ServeGRPCTokenBucket, ServeEnvoyProxy, ServeEnvoyCompat,
			ServeDirectFixedWindow, ServeGRPCFixedWindow, ServeInProcess} {
			require.True(t, seen[name], "%s: %s", sc.Name, name)
		}
	}

	var table bytes.Buffer
	require.NoError(t, WriteTable(&table, Report{Results: results}))
	require.Equal(t, 6, strings.Count(table.String(), "\noverhead of "), table.String())
	require.Contains(t, table.String(), "needs a real redis-server", "the skipped subjects say why")
	require.Contains(t, table.String(), "overhead of "+ServeGRPCTokenBucket+" over "+ServeDirectTokenBucket+": p50 ")
	var page bytes.Buffer
	require.NoError(t, WriteHTML(&page, Report{Results: results}))
	require.Contains(t, page.String(), `<p class="note">overhead of `)
}

// TestServeSubjectsFilter: --subjects filters the serve scenarios' own
// subjects as it does the common ones.
func TestServeSubjectsFilter(t *testing.T) {
	o := Options{Scenarios: ServeScenarios(), OnlySubjects: "envoyproxy"}
	require.Equal(t, 4, Planned(o))
	o.OnlySubjects = "nothing matches this"
	require.Zero(t, Planned(o))
}
