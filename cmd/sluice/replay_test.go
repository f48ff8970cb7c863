package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/replay"
)

// combinedLog writes n combined-format lines from t: key i%keys, one every
// step, with a burst of burstOf from 10.0.0.1 at the start.
func combinedLog(t0 time.Time, n, keys int, step time.Duration) string {
	var b strings.Builder
	line := func(ip string, at time.Time, method, path string) {
		fmt.Fprintf(&b, "%s - - [%s] \"%s %s HTTP/1.1\" 200 12 \"-\" \"test\"\n", ip, at.Format("02/Jan/2006:15:04:05 -0700"), method, path)
	}
	for range burstOf {
		line("10.0.0.1", t0, "GET", "/items")
	}
	for i := range n {
		method, path := "GET", "/items/7"
		if i%5 == 0 {
			method, path = "POST", "/reports"
		}
		line(fmt.Sprintf("10.0.1.%d", i%keys), t0.Add(time.Duration(i)*step), method, path)
	}
	return b.String()
}

const burstOf = 30

var logStart = time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)

func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, err := zw.Write([]byte(s))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return b.Bytes()
}

// replayCLI runs sluice replay with stdin and returns its exit status,
// stdout and stderr.
func replayCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runReplayCommand(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func decodeReport(t *testing.T, s string) replay.Report {
	t.Helper()
	var rep replay.Report
	require.NoError(t, json.Unmarshal([]byte(s), &rep), s)
	return rep
}

func TestReplayFilesInOrderEqualsStandardInput(t *testing.T) {
	first := combinedLog(logStart, 400, 7, time.Second)
	second := combinedLog(logStart.Add(time.Hour), 400, 7, time.Second)
	a := writeTemp(t, "access.log.1.gz", gzipped(t, first))
	b := writeTemp(t, "access.log", []byte(second))

	code, fromFiles, stderr := replayCLI(t, "", "--limit", "20/1m", "--burst", "5", "--json", "-", a, b)
	require.Equal(t, 0, code, stderr)
	code, fromStdin, stderr := replayCLI(t, first+second, "--limit", "20/1m", "--burst", "5", "--json", "-")
	require.Equal(t, 0, code, stderr)
	require.JSONEq(t, fromStdin, fromFiles)

	rep := decodeReport(t, fromFiles)
	require.EqualValues(t, 2*(400+burstOf), rep.Input.Records)
	require.Equal(t, "combined", rep.Input.Format)
	require.Len(t, rep.Results, 5)
	for _, r := range rep.Results {
		require.EqualValues(t, 2*(400+burstOf), r.Requests, r.Algorithm)
		require.Equal(t, r.Requests, r.Allowed+r.Denied, r.Algorithm)
		require.EqualValues(t, 8, r.Keys, r.Algorithm)
		require.NotZero(t, r.Denied, r.Algorithm) // the burst of 30 from 10.0.0.1, at the least
		require.Equal(t, "10.0.0.1", r.TopKeys[0].Key, r.Algorithm)
	}
}

func TestReplayTextReport(t *testing.T) {
	log := writeTemp(t, "access.log", []byte(combinedLog(logStart, 200, 3, time.Second)+"not a log line\n"))
	code, out, stderr := replayCLI(t, "", "--limit", "10/1m", "--algorithms", "tokenbucket,fixedwindow", "--target", "1%", log)
	require.Equal(t, 0, code, stderr)
	for _, want := range []string{
		"replayed 230 records (combined), 2026-11-24 09:00:00 to 2026-11-24 09:03:19",
		"1 lines skipped; line 231: ",
		"policy limit: 10 per 1m0s, burst 10",
		"tokenbucket *",
		"fixedwindow",
		"top keys by denials, tokenbucket:",
		"smallest limit denying at most 1% of keys:",
	} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "slidinglog")
}

func TestReplayPolicyFile(t *testing.T) {
	policies := writeTemp(t, "policies.yaml", []byte(`policies:
  - name: reports
    routes: ["POST /reports"]
    algorithm: slidingcounter
    rate: 2
    period: 1m
  - name: items
    routes: ["GET /items/{id}"]
    rate: 100
    period: 1m
    burst: 10
`))
	log := writeTemp(t, "access.log", []byte(combinedLog(logStart, 500, 5, time.Second)))
	code, out, stderr := replayCLI(t, "", "--policies", policies, "--json", "-", log)
	require.Equal(t, 0, code, stderr)
	rep := decodeReport(t, out)
	byPolicy := map[string][]replay.Result{}
	for _, r := range rep.Results {
		byPolicy[r.Policy] = append(byPolicy[r.Policy], r)
	}
	require.Equal(t, "slidingcounter", byPolicy["reports"][0].Algorithm)
	require.True(t, byPolicy["reports"][0].Own)
	require.EqualValues(t, 100, byPolicy["reports"][0].Requests) // every fifth of 500
	require.EqualValues(t, 400, byPolicy["items"][0].Requests)
	require.EqualValues(t, burstOf, rep.Input.Unmatched) // GET /items matches neither
	require.Equal(t, "tokenbucket", byPolicy["items"][0].Algorithm)
}

func TestReplayWritesTheJSONFileWhole(t *testing.T) {
	dir := t.TempDir()
	log := writeTemp(t, "access.log", []byte(combinedLog(logStart, 50, 2, time.Second)))
	out := filepath.Join(dir, "report.json")
	code, text, stderr := replayCLI(t, "", "--limit", "10/1m", "--json", out, log)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, text, "policy limit") // the text still goes to standard output
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	require.EqualValues(t, 50+burstOf, decodeReport(t, string(data)).Input.Records)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left beside the report")

	// A directory that does not exist: an error, and nothing written.
	code, _, stderr = replayCLI(t, "", "--limit", "10/1m", "--json", filepath.Join(dir, "missing", "r.json"), log)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "missing")
}

func TestReplayWritesTheHTMLPage(t *testing.T) {
	log := writeTemp(t, "access.log", []byte(combinedLog(logStart, 50, 2, time.Second)))
	page := filepath.Join(t.TempDir(), "report.html")
	code, text, stderr := replayCLI(t, "", "--limit", "10/1m", "--html", page, log)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, text, "policy limit")
	html, err := os.ReadFile(page)
	require.NoError(t, err)
	require.Contains(t, string(html), `class="chart timeline"`)
	require.Contains(t, string(html), "10.0.0.1")
}

func TestReplayUsageErrors(t *testing.T) {
	log := writeTemp(t, "access.log", []byte(combinedLog(logStart, 10, 2, time.Second)))
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{log}, 2, "nothing to replay"},
		{[]string{"--limit", "10/1m", "--policies", "p.yaml", log}, 2, "give one"},
		{[]string{"--limit", "10", log}, 2, "rate/period"},
		{[]string{"--limit", "ten/1m", log}, 2, "whole number"},
		{[]string{"--limit", "10/fortnight", log}, 2, "not a duration"},
		{[]string{"--limit", "0/1m", log}, 2, "--limit"},
		{[]string{"--limit", "10/1m", "--target", "150%", log}, 2, "share of keys"},
		{[]string{"--limit", "10/1m", "--target", "x", log}, 2, "share of keys"},
		{[]string{"--limit", "10/1m", "--format", "xml", log}, 2, "unknown format"},
		{[]string{"--limit", "10/1m", "--progress", "sometimes", log}, 2, "--progress"},
		{[]string{"--limit", "10/1m", "--cost", "0", log}, 2, "--cost"},
		{[]string{"--limit", "10/1m", "--max-keys", "0", log}, 2, "--max-keys"},
		{[]string{"--nope"}, 2, "flag provided but not defined"},
		{[]string{"--limit", "10/1m", "--markdown", "--json", "-", log}, 2, "standard output takes one"},
		{[]string{"--policies", "/does/not/exist.yaml", log}, 2, "exist.yaml"},
		{[]string{"--limit", "10/1m", "--algorithms", "leaky", log}, 1, `"leaky"`},
		{[]string{"--limit", "10/1m", filepath.Join(t.TempDir(), "gone.log")}, 1, "gone.log"},
		{[]string{"--limit", "10/1m", t.TempDir()}, 1, "is a directory"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, out, stderr := replayCLI(t, "", c.args...)
			require.Equal(t, c.code, code, stderr)
			require.Contains(t, stderr, c.want)
			require.Empty(t, out)
		})
	}
}

func TestReplayFlagsMayFollowTheLogs(t *testing.T) {
	log := writeTemp(t, "access.log", []byte(combinedLog(logStart, 50, 2, time.Second)))
	code, before, stderr := replayCLI(t, "", "--limit", "10/1m", "--json", "-", log)
	require.Equal(t, 0, code, stderr)
	code, after, stderr := replayCLI(t, "", log, "--limit", "10/1m", "--json", "-")
	require.Equal(t, 0, code, stderr)
	require.JSONEq(t, before, after)
	// After --, every argument is a log.
	code, _, stderr = replayCLI(t, "", "--limit", "10/1m", "--", log, "--json")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "--json")
}

func TestReplayHelp(t *testing.T) {
	code, out, _ := replayCLI(t, "", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, out, "Usage: sluice replay")
	require.Contains(t, out, "-target")
}

func TestProgressLine(t *testing.T) {
	require.Equal(t, "replay: 256.0 MB of 1.0 GB (25%), 1000000 records, 500000 records/s, 6s left   ",
		progressLine(256<<20, 1<<30, 1_000_000, 2*time.Second))
	// Standard input: no total, no time left.
	require.Equal(t, "replay: 10.0 kB, 200 records, 100 records/s   ", progressLine(10<<10, -1, 200, 2*time.Second))
	require.Equal(t, "replay: 3 B read in 2s, done", progressLine(3, 3, -1, 2*time.Second))
}

func TestProgressPrintsAtMostOnceASecondAfterTwo(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := &progress{mode: "auto", src: &logFiles{size: 100, read: 50}, w: &out, now: func() time.Time { return now }}
	p.start, p.last = now, now
	tick := func(d time.Duration) { now = now.Add(d); p.update(replay.Progress{Records: 10}) }
	tick(1500 * time.Millisecond) // under 2 s: auto prints nothing yet
	require.Empty(t, out.String())
	tick(time.Second) // 2.5 s
	require.Equal(t, 1, strings.Count(out.String(), "\r"))
	tick(500 * time.Millisecond) // half a second after the last line
	require.Equal(t, 1, strings.Count(out.String(), "\r"))
	tick(600 * time.Millisecond)
	require.Equal(t, 2, strings.Count(out.String(), "\r"))
	p.done()
	require.True(t, strings.HasSuffix(out.String(), "done\n"))

	out.Reset()
	p = &progress{mode: "never", src: &logFiles{}, w: &out, now: func() time.Time { return now }}
	p.start, p.last = now.Add(-time.Hour), now.Add(-time.Hour)
	p.update(replay.Progress{Records: 1})
	p.done()
	require.Empty(t, out.String())
}

func TestReplayReadsRotatedLogsOldestFirst(t *testing.T) {
	dir := t.TempDir()
	var names []string
	var all strings.Builder
	for i := 2; i >= 0; i-- { // access.log.2.gz is the oldest
		part := combinedLog(logStart.Add(time.Duration(2-i)*time.Hour), 100, 3, time.Second)
		all.WriteString(part)
		name := filepath.Join(dir, fmt.Sprintf("access.log.%d", i))
		require.NoError(t, os.WriteFile(name, []byte(part), 0o644))
		names = append([]string{name}, names...) // newest first, as a glob lists them
	}
	code, fromFiles, stderr := replayCLI(t, "", append([]string{"--limit", "20/1m", "--json", "-"}, names...)...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "reading the logs oldest first: "+names[2]+" "+names[1]+" "+names[0])
	code, fromStdin, _ := replayCLI(t, all.String(), "--limit", "20/1m", "--json", "-")
	require.Equal(t, 0, code)
	require.JSONEq(t, fromStdin, fromFiles)
	require.Zero(t, decodeReport(t, fromFiles).Input.OutOfOrder)
}

func TestReplayKeysPoliciesAsTheirFileDoes(t *testing.T) {
	byHeader := writeTemp(t, "h.yaml", []byte("policies:\n  - name: tenant\n    key: header:X-Tenant\n    rate: 5\n    period: 1s\n"))
	mixed := writeTemp(t, "m.yaml", []byte("policies:\n  - name: ip\n    rate: 5\n    period: 1s\n  - name: tenant\n    key: header:X-Tenant\n    rate: 5\n    period: 1s\n"))
	byClient := writeTemp(t, "c.yaml", []byte("policies:\n  - name: ip\n    rate: 5\n    period: 1s\n"))
	oneHeaderTwoCases := writeTemp(t, "o.yaml", []byte("policies:\n  - name: a\n    key: header:X-Tenant\n    rate: 5\n    period: 1s\n  - name: b\n    key: header:x-tenant\n    rate: 5\n    period: 1s\n"))
	twoHeaders := writeTemp(t, "t.yaml", []byte("policies:\n  - name: tenant\n    key: header:X-Tenant\n    rate: 5\n    period: 1s\n  - name: user\n    key: header:X-User\n    rate: 5\n    period: 1s\n"))
	log := writeTemp(t, "a.jsonl", []byte(`{"time":"2026-11-24T09:00:00Z","remote_addr":"192.0.2.1","tenant":"acme","user":"ann"}`+"\n"))
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--policies", byHeader, log}, 2, `policy "tenant" keys by header:X-Tenant: give --key`},
		{[]string{"--policies", byHeader, "--key", "client", log}, 2, "give --key"},
		{[]string{"--policies", mixed, log}, 2, `policy "tenant" keys by header:X-Tenant: give --key`},
		{[]string{"--policies", mixed, "--key", "tenant", log}, 0, ""},
		{[]string{"--policies", twoHeaders, "--key", "tenant", log}, 2, "--key tenant: several headers key the policies (X-Tenant, X-User): give --key-of HEADER=FIELD for each"},
		{[]string{"--policies", twoHeaders, "--key-of", "X-Tenant=tenant", log}, 2, `policy "user" keys by header:X-User, and other policies by other headers: give --key-of X-User=FIELD`},
		{[]string{"--policies", byHeader, "--key", "user", "--key-of", "X-Tenant=tenant", log}, 2, "--key user and --key-of X-Tenant=tenant: give one"},
		{[]string{"--policies", byHeader, "--key-of", "X-Tenant=client", log}, 2, `"X-Tenant=client": client is the client address`},
		{[]string{"--policies", oneHeaderTwoCases, "--key", "tenant", log}, 0, ""},
		{[]string{"--policies", byHeader, "--key-of", "x-tenant=tenant", log}, 0, ""},
		{[]string{"--policies", twoHeaders, "--key-of", "x-tenant=tenant", "--key-of", "X-User=user", log}, 0, ""},
		{[]string{"--policies", mixed, "--key", "tenant", "--key-of", "X-Other=other", log}, 2, "--key-of X-Other: no policy keys by header:X-Other"},
		{[]string{"--policies", mixed, "--key-of", "X-Tenant", log}, 2, `"X-Tenant": want HEADER=FIELD`},
		{[]string{"--limit", "5/1s", "--key-of", "X-Tenant=tenant", log}, 2, "with --limit, give --key"},
		{[]string{"--policies", byClient, "--key", "tenant", log}, 2, "leave --key out"},
		{[]string{"--policies", byHeader, "--key", "tenant", log}, 0, ""},
		{[]string{"--policies", byClient, log}, 0, ""},
	} {
		code, out, stderr := replayCLI(t, "", c.args...)
		require.Equal(t, c.code, code, "%v: %s", c.args, stderr)
		if c.code != 0 {
			require.Contains(t, stderr, c.want)
		} else {
			require.Contains(t, out, "replayed 1 records")
		}
	}
}

// TestReplayKeysEachPolicyByItsOwnKey: a file with a policy per client
// address and one per tenant header replays both at once, each keyed by
// its own, whichever comes first: a tenant whose requests come from many
// addresses is denied under its policy, and no address is. Likewise two
// policies keyed by two headers, each by its --key-of field.
func TestReplayKeysEachPolicyByItsOwnKey(t *testing.T) {
	ip := "  - name: ip\n    algorithm: fixedwindow\n    rate: 2\n    period: 1m\n"
	tenant := "  - name: tenant\n    key: header:X-Tenant\n    algorithm: fixedwindow\n    rate: 3\n    period: 1m\n"
	user := "  - name: user\n    key: header:X-User\n    algorithm: fixedwindow\n    rate: 1\n    period: 1m\n"
	var b strings.Builder
	for i := range 5 { // five addresses and users, one tenant, in one minute
		fmt.Fprintf(&b, `{"time":"2026-11-24T09:00:%02dZ","remote_addr":"192.0.2.%d","tenant":"acme","user":"u%d"}`+"\n", i, i+1, i)
	}
	log := writeTemp(t, "a.jsonl", []byte(b.String()))
	for _, c := range []struct {
		policies string
		keys     []string
		want     map[string]int64
	}{
		{ip + tenant, []string{"--key", "tenant"}, map[string]int64{"ip": 0, "tenant": 2}},
		{tenant + ip, []string{"--key", "tenant"}, map[string]int64{"ip": 0, "tenant": 2}},
		// Each user's one request is allowed: keyed by the tenant, the
		// user policy would deny all but the first.
		{tenant + user, []string{"--key-of", "X-Tenant=tenant", "--key-of", "X-User=user"}, map[string]int64{"tenant": 2, "user": 0}},
	} {
		file := writeTemp(t, "p.yaml", []byte("policies:\n"+c.policies))
		args := append(append([]string{"--policies", file}, c.keys...), "--algorithms", "fixedwindow", "--json", "-", log)
		code, out, stderr := replayCLI(t, "", args...)
		require.Equal(t, 0, code, stderr)
		denied := map[string]int64{}
		for _, r := range decodeReport(t, out).Results {
			denied[r.Policy] = r.Denied
		}
		require.Equal(t, c.want, denied, c.policies)
	}
}

func TestReplayRefusesAnUnreadableLog(t *testing.T) {
	garbage := writeTemp(t, "g.log", []byte("not a log line\n"))
	for _, c := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"--limit", "10/1m", "--format", "combined", garbage}, "no request could be read from the log: 1 lines skipped, the first line 1: "},
		{"", []string{"--limit", "10/1m"}, "no request could be read from the log"}, // empty standard input
	} {
		code, out, stderr := replayCLI(t, c.stdin, c.args...)
		require.Equal(t, 1, code, stderr)
		require.Contains(t, stderr, c.want)
		require.Empty(t, out)
	}
}

func TestReplayChecksWhereReportsGoFirst(t *testing.T) {
	log := writeTemp(t, "access.log", []byte(combinedLog(logStart, 10, 2, time.Second)))
	missing := filepath.Join(t.TempDir(), "missing", "r.html")
	code, out, stderr := replayCLI(t, "", "--limit", "10/1m", "--html", missing, log)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "cannot write "+missing)
	require.Empty(t, out)
}

func TestReplayFlagListsTrimSpaces(t *testing.T) {
	log := writeTemp(t, "access.log", []byte(combinedLog(logStart, 100, 2, time.Second)))
	code, out, stderr := replayCLI(t, "", "--limit", "10/1m", "--routes", "POST /reports, GET /items/{id}", "--algorithms", "tokenbucket, fixedwindow", "--json", "-", log)
	require.Equal(t, 0, code, stderr)
	rep := decodeReport(t, out)
	require.EqualValues(t, burstOf, rep.Input.Unmatched) // only GET /items
	require.Len(t, rep.Results, 2)
}

func TestReplayRefusesACostNoLimitAllows(t *testing.T) {
	log := writeTemp(t, "access.log", []byte(combinedLog(logStart, 10, 2, time.Second)))
	code, _, stderr := replayCLI(t, "", "--limit", "100/1m", "--burst", "20", "--cost", "30", log)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "cost 30 exceeds 20, the most tokenbucket can ever allow")
}

func TestReplayInterrupted(t *testing.T) {
	log := writeTemp(t, "access.log", []byte(combinedLog(logStart, 10, 2, time.Second)))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	code := runReplayCommand(ctx, []string{"--limit", "10/1m", log}, strings.NewReader(""), &out, &errOut)
	require.Equal(t, 1, code)
	require.Contains(t, errOut.String(), "interrupted: no report")
	require.Empty(t, out.String())
}

func TestProgressAutoPrintsOnlyToATerminal(t *testing.T) {
	var buf bytes.Buffer
	require.Equal(t, "never", newProgress("auto", &logFiles{}, &buf).mode)
	require.Equal(t, "always", newProgress("always", &logFiles{}, &buf).mode)
}
