package harness

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
)

// TestServeScenariosOnTheEmbeddedStore runs both serve scenarios briefly
// on the embedded store: every subject decides (the direct calls, sluice
// serve in process and over gRPC, the envoyproxy/ratelimit-style fixed
// window directly and over gRPC), admits all it is asked under the
// scenarios' large limit, and each server states its overhead over its
// direct call, in the table too.
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
		EnvoyStyleGRPC:       EnvoyStyleDirect,
	}
	for _, sc := range scenarios {
		seen := map[string]bool{}
		for _, r := range results {
			if r.Scenario != sc.Name {
				continue
			}
			seen[r.Subject] = true
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
		for _, name := range []string{ServeDirectTokenBucket, ServeGRPCTokenBucket, EnvoyStyleDirect, EnvoyStyleGRPC,
			ServeDirectFixedWindow, ServeGRPCFixedWindow, ServeInProcess} {
			require.True(t, seen[name], "%s: %s", sc.Name, name)
		}
	}

	var table bytes.Buffer
	require.NoError(t, WriteTable(&table, Report{Results: results}))
	require.Equal(t, 8, strings.Count(table.String(), "\noverhead of "), table.String())
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

// TestEnvoyStyleFixedWindow: the reimplemented fixed window counts a
// descriptor's hits in its window and denies past the limit, directly and
// behind its gRPC server shape, with the statuses' fields.
func TestEnvoyStyleFixedWindow(t *testing.T) {
	client := embeddedClient(t)
	ctx := context.Background()
	e, err := newEnvoyStyle(client, sluice.Limit{Rate: 3, Period: time.Hour, Burst: 3})
	require.NoError(t, err)
	_, err = newEnvoyStyle(client, sluice.Limit{Rate: 3, Period: time.Hour, Burst: 5})
	require.Error(t, err, "a fixed window has no burst")
	_, err = newEnvoyStyle(client, sluice.Limit{Rate: 3, Period: 10 * time.Second, Burst: 3})
	require.Error(t, err, "Envoy's units only")

	// Retried if the test straddles the top of an hour (a new window).
	for attempt := 0; ; attempt++ {
		require.NoError(t, client.FlushAll(ctx).Err())
		hour := time.Now().Truncate(time.Hour)
		var counts []int64
		for range 4 {
			c, reset, err := e.hit(ctx, serveDomain, []*ratelimitv3.RateLimitDescriptor{userDescriptor("u1")}, 1)
			require.NoError(t, err)
			require.LessOrEqual(t, reset, time.Hour)
			counts = append(counts, c[0])
		}
		srv := &envoyStyleServer{e: e}
		resp, err := srv.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: serveDomain,
			Descriptors: []*ratelimitv3.RateLimitDescriptor{userDescriptor("u2"), userDescriptor("u1")}, HitsAddend: 2})
		require.NoError(t, err)
		if time.Now().Truncate(time.Hour) != hour && attempt == 0 {
			continue
		}
		require.Equal(t, []int64{1, 2, 3, 4}, counts)
		require.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, resp.GetOverallCode())
		require.Len(t, resp.GetStatuses(), 2)
		u2, u1 := resp.GetStatuses()[0], resp.GetStatuses()[1]
		require.Equal(t, rlsv3.RateLimitResponse_OK, u2.GetCode())
		require.Equal(t, uint32(1), u2.GetLimitRemaining())
		require.Equal(t, uint32(3), u2.GetCurrentLimit().GetRequestsPerUnit())
		require.Equal(t, rlsv3.RateLimitResponse_RateLimit_HOUR, u2.GetCurrentLimit().GetUnit())
		require.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, u1.GetCode())
		require.Equal(t, uint32(0), u1.GetLimitRemaining())
		require.Positive(t, u1.GetDurationUntilReset().AsDuration())
		ttl, err := client.TTL(ctx, "envoystyle:"+serveDomain+"_user_id_u1_"+strconv.FormatInt(hour.Unix(), 10)).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, 59*time.Minute, "EXPIRE sets the window on every hit")
		_, err = srv.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "other", Descriptors: []*ratelimitv3.RateLimitDescriptor{userDescriptor("u1")}})
		require.Error(t, err, "another domain")
		return
	}
}
