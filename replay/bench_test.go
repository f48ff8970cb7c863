package replay

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithms"
	"github.com/sluicehq/sluice/replay/accesslog"
)

// benchPolicy is the limit the benchmarks replay: 60 a minute, burst 20.
var benchPolicy = Policy{Name: "api", Limit: sluice.PerMinute(60).WithBurst(20)}

// Lines of the generated logs: 1,000 a second of log time (the combined
// format has whole seconds), from benchSlots clients at a time; every
// tenth line is from one of benchHeavy clients that send 120 a minute and
// are denied, the others send about 12 a minute. Each slot's client is
// replaced by a new one every benchTurnover seconds of log time, at
// staggered times, so a longer log has more distinct clients but the same
// number active within any period.
const (
	benchLinesPerSec = 1000
	benchSlots       = 5000
	benchHeavy       = 50
	benchTurnover    = 120
)

var benchStart = time.Date(2026, 10, 10, 13, 0, 0, 0, time.UTC)

// appendBenchLine appends line i of the generated log, in the combined
// format.
func appendBenchLine(b []byte, i int) []byte {
	sec := i / benchLinesPerSec
	slot := (i * 7919) % benchSlots
	if i%10 == 0 {
		slot = i / 10 % benchHeavy
	}
	client := (sec+slot%benchTurnover)/benchTurnover*benchSlots + slot
	b = fmt.Appendf(b, `10.%d.%d.%d - - [%s] "GET /items/%d HTTP/1.1" 200 %d "https://example.com/" "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0"`,
		client>>16&255, client>>8&255, client&255, benchStart.Add(time.Duration(sec)*time.Second).Format("02/Jan/2006:15:04:05 -0700"), i%100, 100+i%900)
	return append(b, '\n')
}

// benchLog is the first n lines of the generated log, in memory.
func benchLog(n int) []byte {
	var b []byte
	for i := range n {
		b = appendBenchLine(b, i)
	}
	return b
}

// genLogReader yields the first n lines of the generated log without
// holding them, so that a replay's heap is the replay's alone.
type genLogReader struct {
	i, n int
	buf  []byte
	off  int
}

func (g *genLogReader) Read(p []byte) (int, error) {
	if g.off == len(g.buf) {
		if g.i == g.n {
			return 0, io.EOF
		}
		g.buf, g.off = g.buf[:0], 0
		for k := 0; k < 256 && g.i < g.n; k++ {
			g.buf = appendBenchLine(g.buf, g.i)
			g.i++
		}
	}
	n := copy(p, g.buf[g.off:])
	g.off += n
	return n, nil
}

// BenchmarkReplay is the whole pipeline of sluice replay on a combined-
// format log in memory: parsing, keying by client address, and deciding
// every line under one algorithm (or, in all5, under the five at once),
// reported in log lines per second. Issue 27 asks for at least 500,000 per
// algorithm on a 2-core machine.
func BenchmarkReplay(b *testing.B) {
	const lines = 200_000
	data := benchLog(lines)
	for _, name := range append(slices.Clone(algorithms.Names), "all5") {
		b.Run(name, func(b *testing.B) {
			algs, results := []string{name}, 1
			if name == "all5" {
				algs, results = nil, len(algorithms.Names)
			}
			b.ReportAllocs()
			var n int64
			for b.Loop() {
				rep := replayBench(b, bytes.NewReader(data), Config{Policies: []Policy{benchPolicy}, Algorithms: algs})
				n += rep.Input.Records
				if rep.Input.Records != lines || len(rep.Results) != results {
					b.Fatalf("%d records, %d results", rep.Input.Records, len(rep.Results))
				}
				if r := rep.Results[0]; r.Denied == 0 || r.Allowed == 0 {
					b.Fatalf("%s: %d allowed, %d denied: the log should have both", r.Algorithm, r.Allowed, r.Denied)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "lines/s")
		})
	}
}

func replayBench(b *testing.B, r io.Reader, cfg Config) *Report {
	b.Helper()
	rd, err := accesslog.NewReader(r, accesslog.Options{Format: accesslog.Combined})
	if err != nil {
		b.Fatal(err)
	}
	rep, err := Run(context.Background(), rd, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if rep.Input.Skipped != 0 {
		b.Fatalf("%d lines skipped: %v", rep.Input.Skipped, rep.Input.SkippedLines)
	}
	return rep
}

// BenchmarkReplayMemory replays 1M and then 4M lines of the generated log
// under the five algorithms, with the same clients active within any
// period but four times as many in all, and reports the largest live heap
// (after a GC, sampled every 2^16 lines) of each replay, above the heap
// before it, and their ratio. Memory is bounded by the keys active within
// a period and Config.MaxKeys: with MaxKeys below the log's distinct
// clients the ratio stays near 1 (checked at 1.5). With the default
// (2^17 keys, about 25 MB per subject) the 1M-line log's clients fit in
// the table and the 4M-line log's fill it: default-ratio shows the table
// filling up to its bound, not past it.
func BenchmarkReplayMemory(b *testing.B) {
	peak := func(lines, maxKeys int) float64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		base, top := m.HeapInuse, m.HeapInuse
		sample := func(Progress) {
			runtime.GC()
			runtime.ReadMemStats(&m)
			top = max(top, m.HeapInuse)
		}
		rep := replayBench(b, &genLogReader{n: lines}, Config{Policies: []Policy{benchPolicy}, MaxKeys: maxKeys,
			Progress: sample, ProgressEvery: 1 << 16})
		if rep.Input.Records != int64(lines) {
			b.Fatalf("%d records of %d", rep.Input.Records, lines)
		}
		return float64(top - base)
	}
	for _, c := range []struct {
		name    string
		maxKeys int
		limit   float64 // the ratio at most, 0 for none
	}{{"maxkeys20000", 20_000, 1.5}, {"default", 0, 0}} {
		b.Run(c.name, func(b *testing.B) {
			var small, large float64
			for b.Loop() {
				small, large = peak(1_000_000, c.maxKeys), peak(4_000_000, c.maxKeys)
			}
			b.ReportMetric(small/(1<<20), "MB-1M")
			b.ReportMetric(large/(1<<20), "MB-4M")
			b.ReportMetric(large/small, "ratio")
			if c.limit > 0 && large/small > c.limit {
				b.Errorf("the live heap grew %.2fx from 1M to 4M lines with the same active keys", large/small)
			}
		})
	}
}
