package main

import (
	"bytes"
	"flag"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/embedded"
	"github.com/sluicehq/sluice/store/memstore"
	"github.com/stretchr/testify/require"
)

// startEmbedded starts an embedded store that the test closes at its end.
func startEmbedded(t *testing.T) *embedded.Store {
	t.Helper()
	s, err := embedded.Start()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func TestSimulateOnEmbedded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  demoConfig
	}{
		{
			// 300 requests; ideal 30 + 30 x 30s / 1m = 45. At 10 pods each
			// pod still sees 1 request/s against a limit of 0.5/s.
			name: "30/min, 10 req/s, 30s",
			cfg:  demoConfig{LimitPerMinute: 30, RatePerSecond: 10, Duration: 30 * time.Second, Pods: []int{2, 4, 10}},
		},
		{
			// 1200 requests; ideal 60 + 60 x 1m / 1m = 120.
			name: "60/min, 20 req/s, 1m",
			cfg:  demoConfig{LimitPerMinute: 60, RatePerSecond: 20, Duration: time.Minute, Pods: []int{2, 3, 5, 8}},
		},
		{
			// A rate that does not divide the period: 7/min refills every
			// 8.571429 s. 1000 requests; ideal 7 + floor(7 x 100s / 1m) = 18.
			name: "7/min, 10 req/s, 100s",
			cfg:  demoConfig{LimitPerMinute: 7, RatePerSecond: 10, Duration: 100 * time.Second, Pods: []int{2, 4}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.NoError(t, tt.cfg.validate())
			res, err := simulate(t.Context(), tt.cfg, startEmbedded(t), "test")
			require.NoError(t, err)

			limit := tt.cfg.limit()
			require.Equal(t, limit, res.Limit)
			require.Equal(t, tt.cfg.requests(), res.Sent)
			// The client exceeds the limit, so the ideal is not capped.
			require.Less(t, res.Ideal, res.Sent)
			// What one bucket permits over the duration, per pod.
			perBucket := float64(limit.Burst) + float64(limit.Rate)*tt.cfg.Duration.Seconds()/limit.Period.Seconds()

			require.Len(t, res.Columns, len(tt.cfg.Pods))
			for i, c := range res.Columns {
				require.Equal(t, tt.cfg.Pods[i], c.Pods)
				require.LessOrEqual(t, c.Shared, res.Ideal, "%d pods: the shared bucket admits no more than the limit", c.Pods)
				require.GreaterOrEqual(t, float64(c.Shared), 0.95*float64(res.Ideal), "%d pods: the shared bucket admits nearly all the limit permits", c.Pods)
				require.Greater(t, c.PerPod, c.Shared, "%d pods: per-pod buckets over-admit", c.Pods)
				require.LessOrEqual(t, c.PerPod, res.Sent)
				require.LessOrEqual(t, float64(c.PerPod), float64(c.Pods)*perBucket, "%d pods: each pod's bucket keeps its own limit", c.Pods)
				if i > 0 {
					require.Greater(t, c.PerPod, res.Columns[i-1].PerPod, "per-pod admissions grow with the number of pods")
				}
				// The shared bucket does not care how many pods share it.
				require.Equal(t, res.Columns[0].Shared, c.Shared)
			}
		})
	}
}

// With one pod, a per-pod bucket on memstore (the Go twin) and the shared
// bucket on the embedded store (the Lua script) are the same bucket, so they
// must admit exactly the same requests.
func TestSimulateOnePodMatchesShared(t *testing.T) {
	t.Parallel()
	cfg := demoConfig{LimitPerMinute: 13, RatePerSecond: 3, Duration: 2 * time.Minute, Pods: []int{1}}
	res, err := simulate(t.Context(), cfg, startEmbedded(t), "test")
	require.NoError(t, err)
	require.Len(t, res.Columns, 1)
	require.Equal(t, res.Columns[0].PerPod, res.Columns[0].Shared)
	require.LessOrEqual(t, res.Columns[0].Shared, res.Ideal)
}

// When each pod sees less than the limit, per-pod buckets admit everything
// and the shared bucket still holds the fleet to the limit.
func TestSimulatePerPodAdmitsAllWhenPodsOutnumberTheLimit(t *testing.T) {
	t.Parallel()
	// 5 req/s against 1/s: at 10 pods each pod sees 0.5/s.
	cfg := demoConfig{LimitPerMinute: 60, RatePerSecond: 5, Duration: time.Minute, Pods: []int{10, 20}}
	mem, err := memstore.New()
	require.NoError(t, err)
	res, err := simulate(t.Context(), cfg, mem, "test")
	require.NoError(t, err)
	require.Equal(t, int64(300), res.Sent)
	require.Equal(t, int64(120), res.Ideal)
	for _, c := range res.Columns {
		require.Equal(t, res.Sent, c.PerPod, "%d pods", c.Pods)
		require.LessOrEqual(t, c.Shared, res.Ideal, "%d pods", c.Pods)
		require.GreaterOrEqual(t, float64(c.Shared), 0.95*float64(res.Ideal), "%d pods", c.Pods)
	}
}

// A client slower than the limit is never denied, and the ideal is what it
// sends.
func TestSimulateClientWithinLimit(t *testing.T) {
	t.Parallel()
	cfg := demoConfig{LimitPerMinute: 120, RatePerSecond: 1, Duration: time.Minute, Pods: []int{2}}
	res, err := simulate(t.Context(), cfg, startEmbedded(t), "test")
	require.NoError(t, err)
	require.Equal(t, int64(60), res.Sent)
	require.Equal(t, res.Sent, res.Ideal)
	require.Equal(t, []podsResult{{Pods: 2, PerPod: 60, Shared: 60}}, res.Columns)
}

func TestRunDemoOnEmbedded(t *testing.T) {
	t.Parallel()
	cfg := demoConfig{LimitPerMinute: 30, RatePerSecond: 10, Duration: 30 * time.Second, Pods: []int{2, 4}}
	var out bytes.Buffer
	require.NoError(t, runDemo(t.Context(), &out, cfg))

	text := out.String()
	require.Contains(t, text, "the embedded store")
	rows := tableRows(t, text)
	require.Equal(t, []string{"2 pods", "4 pods"}, rows[""])
	require.Equal(t, []string{"300", "300"}, rows["requests sent"])
	require.Equal(t, []string{"45", "45"}, rows["ideal: what the limit permits"])
	perPod := atois(t, rows["admitted by per-pod buckets"])
	shared := atois(t, rows["admitted by Sluice (shared bucket)"])
	for i := range shared {
		require.LessOrEqual(t, shared[i], 45)
		require.GreaterOrEqual(t, float64(shared[i]), 0.95*45)
		require.Greater(t, perPod[i], shared[i])
	}
	require.Greater(t, perPod[1], perPod[0])
}

func TestRunDemoOnRedis(t *testing.T) {
	t.Parallel()
	server := miniredis.RunT(t)
	// A key of someone else's, which the demo must leave alone.
	server.DB(2).Set("other", "value")

	cfg := demoConfig{
		LimitPerMinute: 30, RatePerSecond: 10, Duration: 30 * time.Second, Pods: []int{2, 4},
		RedisURL: "redis://" + server.Addr() + "/2",
	}
	var out bytes.Buffer
	require.NoError(t, runDemo(t.Context(), &out, cfg))

	text := out.String()
	require.Contains(t, text, "Redis at "+server.Addr()+", database 2")
	require.Contains(t, text, "deleted at the end")
	require.Equal(t, []string{"45", "45"}, tableRows(t, text)["ideal: what the limit permits"])
	require.Equal(t, []string{"other"}, server.DB(2).Keys(), "the demo deletes its keys and only its keys")
	require.Empty(t, server.DB(0).Keys())
	// The shared bucket ran there: 2 runs of 300 requests, with EVALSHA.
	require.GreaterOrEqual(t, server.CommandCount(), 600)
}

func TestRunDemoRedisUnreachable(t *testing.T) {
	t.Parallel()
	// A loopback port with nothing listening on it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	cfg := defaultDemoConfig()
	cfg.RedisURL = "redis://" + addr + "/0"
	var out bytes.Buffer
	err = runDemo(t.Context(), &out, cfg)
	require.ErrorContains(t, err, "connect to Redis at "+addr)
	require.Empty(t, out.String())
}

func TestRunDemoRejectsInvalidConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		modify func(*demoConfig)
		want   string
	}{
		{name: "zero limit", modify: func(c *demoConfig) { c.LimitPerMinute = 0 }, want: "--limit"},
		{name: "negative limit", modify: func(c *demoConfig) { c.LimitPerMinute = -1 }, want: "--limit"},
		{name: "limit too large", modify: func(c *demoConfig) { c.LimitPerMinute = 1 << 40 }, want: "--limit"},
		{name: "zero rate", modify: func(c *demoConfig) { c.RatePerSecond = 0 }, want: "--rate"},
		{name: "zero duration", modify: func(c *demoConfig) { c.Duration = 0 }, want: "--duration"},
		{name: "no pods", modify: func(c *demoConfig) { c.Pods = nil }, want: "--pods"},
		{name: "zero pods", modify: func(c *demoConfig) { c.Pods = []int{2, 0} }, want: "--pods"},
		{name: "bad redis url", modify: func(c *demoConfig) { c.RedisURL = "http://localhost" }, want: "--redis"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := defaultDemoConfig()
			tt.modify(&cfg)
			var out bytes.Buffer
			err := runDemo(t.Context(), &out, cfg)
			require.ErrorContains(t, err, tt.want)
			require.Empty(t, out.String())
		})
	}
}

func TestParseDemoFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		want    demoConfig
		wantErr string // empty: no error
	}{
		{name: "defaults", args: nil, want: defaultDemoConfig()},
		{
			name: "all flags",
			args: []string{"--limit", "10", "--rate=2.5", "--duration", "90s", "--pods", " 3, 5 ", "--redis", "redis://localhost:6380/1"},
			want: demoConfig{LimitPerMinute: 10, RatePerSecond: 2.5, Duration: 90 * time.Second, Pods: []int{3, 5}, RedisURL: "redis://localhost:6380/1"},
		},
		{name: "one pod", args: []string{"-pods", "1"}, want: func() demoConfig { c := defaultDemoConfig(); c.Pods = []int{1}; return c }()},
		{name: "pods 0", args: []string{"--pods", "0"}, wantErr: "pod count must be between 1 and"},
		{name: "pods negative", args: []string{"--pods", "2,-4"}, wantErr: "pod count must be between 1 and"},
		{name: "pods empty", args: []string{"--pods", ""}, wantErr: "is not a pod count"},
		{name: "pods not a number", args: []string{"--pods", "2,x"}, wantErr: `"x" is not a pod count`},
		{name: "pods twice", args: []string{"--pods", "2,4,2"}, wantErr: "listed twice"},
		{name: "pods too many", args: []string{"--pods", "100000"}, wantErr: "pod count must be between 1 and"},
		{name: "limit -1", args: []string{"--limit", "-1"}, wantErr: "--limit must be at least 1"},
		{name: "limit 0", args: []string{"--limit", "0"}, wantErr: "--limit must be at least 1"},
		{name: "limit not a number", args: []string{"--limit", "ten"}, wantErr: "invalid value"},
		{name: "rate 0", args: []string{"--rate", "0"}, wantErr: "--rate"},
		{name: "rate negative", args: []string{"--rate", "-5"}, wantErr: "--rate"},
		{name: "rate NaN", args: []string{"--rate", "NaN"}, wantErr: "--rate"},
		{name: "rate infinite", args: []string{"--rate", "+Inf"}, wantErr: "--rate"},
		{name: "duration 0", args: []string{"--duration", "0s"}, wantErr: "--duration"},
		{name: "duration negative", args: []string{"--duration", "-1m"}, wantErr: "--duration"},
		{name: "too many requests", args: []string{"--rate", "1000", "--duration", "24h"}, wantErr: "at most 1000000 per run"},
		{name: "bad redis url", args: []string{"--redis", "localhost:6379"}, wantErr: "--redis"},
		{name: "unknown flag", args: []string{"--pod", "2"}, wantErr: "flag provided but not defined"},
		{name: "extra argument", args: []string{"--limit", "5", "now"}, wantErr: `unexpected argument "now"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var (
				got demoConfig
				err error
			)
			require.NotPanics(t, func() { got, err = parseDemoFlags(tt.args) })
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestParseDemoFlagsHelp(t *testing.T) {
	t.Parallel()
	_, err := parseDemoFlags([]string{"-h"})
	require.ErrorIs(t, err, flag.ErrHelp)
}

func TestRequestsAndIdeal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		cfg       demoConfig
		wantSent  int64
		wantIdeal int64
	}{
		{name: "defaults", cfg: defaultDemoConfig(), wantSent: 3600, wantIdeal: 240},
		{name: "5 req/s for 3m", cfg: demoConfig{LimitPerMinute: 60, RatePerSecond: 5, Duration: 3 * time.Minute}, wantSent: 900, wantIdeal: 240},
		{name: "fractional refill", cfg: demoConfig{LimitPerMinute: 7, RatePerSecond: 10, Duration: 30 * time.Second}, wantSent: 300, wantIdeal: 7 + 3},
		{name: "slow client", cfg: demoConfig{LimitPerMinute: 60, RatePerSecond: 0.5, Duration: 3 * time.Second}, wantSent: 2, wantIdeal: 2},
		{name: "one request", cfg: demoConfig{LimitPerMinute: 60, RatePerSecond: 1, Duration: time.Millisecond}, wantSent: 1, wantIdeal: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sent := tt.cfg.requests()
			require.Equal(t, tt.wantSent, sent)
			require.Equal(t, tt.wantIdeal, idealAdmitted(tt.cfg.limit(), tt.cfg.Duration, sent))
		})
	}
}

func TestFakeClock(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)
	c := newFakeClock(start)
	require.Equal(t, start, c.Now())
	c.Set(start.Add(time.Hour))
	require.Equal(t, start.Add(time.Hour), c.Now())
	var _ sluice.Clock = c
}

func TestRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string // a substring of stdout; empty: stdout is empty
		wantStderr string // a substring of stderr; empty: stderr is empty
	}{
		{name: "no command", args: nil, wantCode: 2, wantStderr: "Usage:"},
		{name: "unknown command", args: []string{"limit"}, wantCode: 2, wantStderr: `unknown command "limit"`},
		{name: "help", args: []string{"help"}, wantCode: 0, wantStdout: "sluice <command> [flags]"},
		{name: "--help", args: []string{"--help"}, wantCode: 0, wantStdout: "sluice <command> [flags]"},
		{name: "help demo", args: []string{"help", "demo"}, wantCode: 0, wantStdout: "-pods counts"},
		{name: "help unknown", args: []string{"help", "limit"}, wantCode: 2, wantStderr: `unknown help topic "limit"`},
		{name: "demo -h", args: []string{"demo", "-h"}, wantCode: 0, wantStdout: "Usage: sluice demo [flags]"},
		{name: "demo bad pods", args: []string{"demo", "--pods", "0"}, wantCode: 2, wantStderr: "sluice demo: invalid value"},
		{name: "demo bad limit", args: []string{"demo", "--limit", "-1"}, wantCode: 2, wantStderr: "sluice demo: --limit must be at least 1"},
		{
			name:       "demo",
			args:       []string{"demo", "--limit", "30", "--rate", "10", "--duration", "30s", "--pods", "2,4"},
			wantCode:   0,
			wantStdout: "over-admission, Sluice",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), tt.args, &stdout, &stderr)
			require.Equal(t, tt.wantCode, code, "stderr: %s", stderr.String())
			if tt.wantStdout == "" {
				require.Empty(t, stdout.String())
			} else {
				require.Contains(t, stdout.String(), tt.wantStdout)
			}
			if tt.wantStderr == "" {
				require.Empty(t, stderr.String())
			} else {
				require.Contains(t, stderr.String(), tt.wantStderr)
			}
		})
	}
}

// tableRows returns the cells of the demo's table by row label; the header
// row's label is "".
func tableRows(t *testing.T, text string) map[string][]string {
	t.Helper()
	labels := []string{
		"requests sent",
		"admitted by per-pod buckets",
		"admitted by Sluice (shared bucket)",
		"ideal: what the limit permits",
		"over-admission, per-pod",
		"over-admission, Sluice",
	}
	rows := make(map[string][]string)
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, " ") && strings.HasSuffix(line, " pods") {
			// The header: "  2 pods  4 pods".
			f := strings.Fields(line)
			for i := 0; i+1 < len(f); i += 2 {
				rows[""] = append(rows[""], f[i]+" "+f[i+1])
			}
			continue
		}
		for _, l := range labels {
			if rest, ok := strings.CutPrefix(line, l+" "); ok {
				rows[l] = strings.Fields(rest)
			}
		}
	}
	require.Len(t, rows, len(labels)+1, "table in:\n%s", text)
	return rows
}

func atois(t *testing.T, cells []string) []int {
	t.Helper()
	out := make([]int, len(cells))
	for i, c := range cells {
		n, err := strconv.Atoi(c)
		require.NoError(t, err)
		out[i] = n
	}
	return out
}
