package harness

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/embedded"
)

// embeddedClient starts the embedded store and returns a client to it;
// both close when the test ends.
func embeddedClient(t *testing.T) *redis.Client {
	store, err := embedded.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	client := redis.NewClient(&redis.Options{Addr: store.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// TestRunOnTheEmbeddedStore runs two scenarios against a few subjects on
// the embedded store and checks what the results must say whatever the
// machine: steady traffic under the limit is all admitted, per-pod
// x/time/rate limiters admit more than the shared limit while Sluice's
// shared bucket does not.
func TestRunOnTheEmbeddedStore(t *testing.T) {
	client := embeddedClient(t)

	var scenarios []Scenario
	for _, s := range Scenarios() {
		if strings.HasPrefix(s.Name, "steady") || strings.HasPrefix(s.Name, "pods") {
			scenarios = append(scenarios, s)
		}
	}
	var subjects []Subject
	for _, s := range Subjects() {
		if s.Name == "sluice/tokenbucket" || s.Name == "x/time/rate (in process)" || s.Name == "PING (go-redis)" {
			subjects = append(subjects, s)
		}
	}
	require.Len(t, scenarios, 2)
	require.Len(t, subjects, 3)
	results := Run(context.Background(), Options{Duration: 600 * time.Millisecond, Scenarios: scenarios, Subjects: subjects, Clients: Clients{GoRedis: client}})
	require.Len(t, results, 4, "PING, a baseline, runs in throughput scenarios only")
	byKey := map[string]Result{}
	for _, r := range results {
		require.Empty(t, r.Error, r.Subject)
		byKey[r.Scenario[:5]+"/"+r.Subject] = r
	}
	steady := byKey["stead/sluice/tokenbucket"]
	require.Equal(t, steady.Requests, steady.Admitted, "under the limit, everything is admitted")
	require.Len(t, steady.AdmittedOverTime, 10)
	shared, perPod := byKey["pods /sluice/tokenbucket"], byKey["pods /x/time/rate (in process)"]
	require.LessOrEqual(t, shared.Admitted, shared.Ideal, "the shared bucket holds the limit")
	require.Greater(t, perPod.Admitted, perPod.Ideal, "per-pod limiters admit more than the limit")
}

// TestLatencyInterleavesPing: in the latency scenario each remote subject's
// decisions alternate with PINGs through its own client, timed apart; an
// in-process subject has none, and the terminal table shows the ratio.
func TestLatencyInterleavesPing(t *testing.T) {
	client := embeddedClient(t)
	var latency []Scenario
	for _, s := range Scenarios() {
		if strings.HasPrefix(s.Name, "latency") {
			latency = append(latency, s)
		}
	}
	var subjects []Subject
	for _, s := range Subjects() {
		if s.Name == "sluice/tokenbucket" || s.Name == "x/time/rate (in process)" {
			subjects = append(subjects, s)
		}
	}
	require.Len(t, latency, 1)
	require.Len(t, subjects, 2)
	var pings atomic.Int64
	subjects[0].Ping = func(c Clients) Decide {
		ping := pingGoRedis(c)
		return func(ctx context.Context, key string) (bool, error) {
			pings.Add(1)
			return ping(ctx, key)
		}
	}
	results := Run(context.Background(), Options{Duration: 300 * time.Millisecond, Scenarios: latency, Subjects: subjects, Clients: Clients{GoRedis: client}})
	require.Len(t, results, 2)
	remote, local := results[0], results[1]
	require.Empty(t, remote.Error)
	require.NotNil(t, remote.PingLatencyMicros)
	require.Positive(t, remote.PingLatencyMicros.P50)
	require.Equal(t, remote.Requests, pings.Load(), "one PING before each decision")
	require.Nil(t, local.PingLatencyMicros, "nothing to PING in process")
	require.Contains(t, outCells(remote)[6], "× PING")
}

// TestDegradedRunsAreMarked: when the fallback decorator decides instead
// of Redis (here Redis is not there at all), the run counts those
// decisions and is marked with an error, so that its figures are never
// read as Redis's.
func TestDegradedRunsAreMarked(t *testing.T) {
	client := embeddedClient(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	nobody := l.Addr().String()
	require.NoError(t, l.Close())
	dead := redis.NewClient(&redis.Options{Addr: nobody, MaxRetries: -1})
	t.Cleanup(func() { _ = dead.Close() })
	var subject Subject
	for _, s := range Subjects() {
		if s.Name == "sluice/tokenbucket+fallback+sluiceotel" {
			subject = s
		}
	}
	require.NotNil(t, subject.New)
	decide, closeFn, err := subject.New(Clients{GoRedis: dead}, sluice.PerSecond(100))
	require.NoError(t, err)
	defer closeFn()
	allowed, err := decide(t.Context(), "k")
	require.ErrorIs(t, err, errDegraded)
	require.True(t, allowed, "the default policy allows")

	var steady []Scenario
	for _, s := range Scenarios() {
		if strings.HasPrefix(s.Name, "steady") {
			steady = append(steady, s)
		}
	}
	require.Len(t, steady, 1)
	// The harness flushes and reads stats through GoRedis; the subject
	// talks to the dead address through its own store.
	subject.New = func(_ Clients, limit sluice.Limit) (Decide, func(), error) {
		return decide, func() {}, nil
	}
	results := Run(t.Context(), Options{Duration: 300 * time.Millisecond, Scenarios: steady, Subjects: []Subject{subject}, Clients: Clients{GoRedis: client}})
	require.Len(t, results, 1)
	r := results[0]
	require.Positive(t, r.Requests)
	require.Equal(t, r.Requests, r.Degraded, "every decision was the policy's")
	require.Contains(t, r.Error, "made by the fallback policy, not by Redis")
}

// TestRunInRounds: a throughput scenario in rounds runs every subject
// once per round, in turn (a, b, a, b), and gives one result per subject
// holding each round's figures.
func TestRunInRounds(t *testing.T) {
	client := embeddedClient(t)
	var throughput Scenario
	for _, s := range Scenarios() {
		if strings.HasPrefix(s.Name, "throughput: one hot key") {
			throughput = s
		}
	}
	var order []string
	subject := func(name string) Subject {
		return Subject{Name: name, New: func(_ Clients, _ sluice.Limit) (Decide, func(), error) {
			order = append(order, name)
			return func(context.Context, string) (bool, error) { return true, nil }, func() {}, nil
		}}
	}
	results := Run(t.Context(), Options{Duration: 400 * time.Millisecond, Rounds: 2, Scenarios: []Scenario{throughput},
		Subjects: []Subject{subject("a"), subject("b")}, Clients: Clients{GoRedis: client}})
	require.Equal(t, []string{"a", "b", "a", "b"}, order)
	require.Len(t, results, 2)
	for _, r := range results {
		require.Empty(t, r.Error)
		require.Len(t, r.Rounds, 2, r.Subject)
		require.Positive(t, r.Rounds[0].DecisionsPerSecond)
		require.Positive(t, r.Rounds[1].DecisionsPerSecond)
	}
}
