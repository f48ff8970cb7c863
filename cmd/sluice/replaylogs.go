package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/sluicehq/sluice/replay"
	"github.com/sluicehq/sluice/replay/accesslog"
)

// logFiles reads several logs one after the other as one replay.Source,
// counting the bytes read (compressed, as stored) for the progress line.
// A file's lines keep their own numbers; a skipped line names its file.
type logFiles struct {
	names   []string
	stdin   io.Reader
	opts    accesslog.Options
	next    int
	cur     *accesslog.Reader
	file    *os.File
	read    int64 // bytes read, all files
	size    int64 // bytes in all, or -1 when unknown (standard input)
	err     error
	skipped int64
	lines   []accesslog.LineError
	format  accesslog.Format
}

func openLogs(names []string, stdin io.Reader, opts accesslog.Options) (*logFiles, error) {
	if len(names) == 0 {
		names = []string{"-"}
	}
	l := &logFiles{names: names, stdin: stdin, opts: opts}
	for _, n := range names {
		if n == "-" {
			l.size = -1
			continue
		}
		info, err := os.Stat(n)
		if err != nil {
			return nil, err
		}
		if info.IsDir() {
			return nil, fmt.Errorf("%s is a directory", n)
		}
		if l.size >= 0 {
			l.size += info.Size()
		}
	}
	if err := l.open(); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// open opens the next file; l.cur is nil when none is left.
func (l *logFiles) open() error {
	l.cur = nil
	if l.next == len(l.names) {
		return nil
	}
	name := l.names[l.next]
	l.next++
	var r io.Reader = l.stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		l.file, r = f, f
	}
	rd, err := accesslog.NewReader(&countingReader{r: r, n: &l.read}, l.opts)
	if err == accesslog.ErrEmpty {
		l.closeFile()
		return l.open() // an empty log adds nothing
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	l.cur, l.format = rd, rd.Format()
	return nil
}

func (l *logFiles) Next() (accesslog.Record, bool) {
	for l.cur != nil {
		if rec, ok := l.cur.Next(); ok {
			return rec, true
		}
		if err := l.finish(); err != nil {
			l.err = err
			return accesslog.Record{}, false
		}
		if err := l.open(); err != nil {
			l.err = err
			return accesslog.Record{}, false
		}
	}
	return accesslog.Record{}, false
}

// finish collects the current file's skipped lines and closes it.
func (l *logFiles) finish() error {
	name := l.names[l.next-1]
	n, first := l.cur.Skipped()
	l.skipped += n
	for _, e := range first {
		if len(l.names) > 1 {
			e.Reason = name + ": " + e.Reason
		}
		l.lines = append(l.lines, e)
	}
	err := l.cur.Err()
	l.closeFile()
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func (l *logFiles) closeFile() {
	if l.file != nil {
		l.file.Close()
		l.file = nil
	}
}

func (l *logFiles) Err() error { return l.err }

func (l *logFiles) Skipped() (int64, []accesslog.LineError) {
	n, lines := l.skipped, l.lines
	if l.cur != nil {
		m, first := l.cur.Skipped()
		n += m
		lines = append(lines[:len(lines):len(lines)], first...)
	}
	return n, lines
}

func (l *logFiles) Format() accesslog.Format { return l.format }

func (l *logFiles) Close() { l.closeFile() }

type countingReader struct {
	r io.Reader
	n *int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += int64(n)
	return n, err
}

// progress prints a line on standard error at most once a second: bytes
// read of the total, records, their rate and, when the total is known,
// the time left at that rate. In auto mode it starts after 2 s, so short
// replays print nothing.
type progress struct {
	mode    string
	src     *logFiles
	w       io.Writer
	start   time.Time
	last    time.Time
	printed bool
	now     func() time.Time
}

// In auto mode it prints only to a terminal: a log file or a pipe gets no
// carriage-return lines.
func newProgress(mode string, src *logFiles, w io.Writer) *progress {
	if mode == "auto" {
		if f, ok := w.(*os.File); !ok || !isTerminal(f) {
			mode = "never"
		}
	}
	p := &progress{mode: mode, src: src, w: w, now: time.Now}
	p.start = p.now()
	p.last = p.start
	return p
}

func (p *progress) update(pr replay.Progress) {
	if p.mode == "never" {
		return
	}
	now := p.now()
	elapsed := now.Sub(p.start)
	if now.Sub(p.last) < time.Second || p.mode == "auto" && elapsed < 2*time.Second {
		return
	}
	p.last = now
	p.printed = true
	fmt.Fprintf(p.w, "\r%s", progressLine(p.src.read, p.src.size, pr.Records, elapsed))
}

func (p *progress) done() {
	if p.printed {
		fmt.Fprintf(p.w, "\r%s\n", progressLine(p.src.read, p.src.size, -1, p.now().Sub(p.start)))
	}
}

// progressLine says how far a replay is; records < 0 means it is done.
func progressLine(read, size, records int64, elapsed time.Duration) string {
	if records < 0 {
		return fmt.Sprintf("replay: %s read in %s, done", bytesOf(read), elapsed.Round(time.Second))
	}
	rate := float64(records) / max(elapsed.Seconds(), 1e-9)
	line := fmt.Sprintf("replay: %s", bytesOf(read))
	if size > 0 {
		line += fmt.Sprintf(" of %s (%d%%)", bytesOf(size), read*100/size)
	}
	line += fmt.Sprintf(", %d records, %.0f records/s", records, rate)
	if size > 0 && read > 0 {
		left := time.Duration(float64(elapsed) * float64(size-read) / float64(read))
		line += fmt.Sprintf(", %s left", left.Round(time.Second))
	}
	return line + "   "
}

func bytesOf(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f kB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// oldestFirst orders logs by the time of their first record, so that
// rotated logs given newest first, as a shell glob lists them (access.log
// access.log.1 access.log.2.gz), replay in time order. Standard input
// cannot be read twice: with "-" among them, the order is as given. A log
// with no record sorts first (it adds nothing). reordered reports a change.
func oldestFirst(names []string, opts accesslog.Options) (ordered []string, reordered bool, err error) {
	if len(names) < 2 || slices.Contains(names, "-") {
		return names, false, nil
	}
	type log struct {
		name  string
		first time.Time
	}
	logs := make([]log, len(names))
	for i, name := range names {
		logs[i].name = name
		if logs[i].first, err = firstTime(name, opts); err != nil {
			return nil, false, err
		}
	}
	slices.SortStableFunc(logs, func(a, b log) int { return a.first.Compare(b.first) })
	for i, l := range logs {
		ordered = append(ordered, l.name)
		reordered = reordered || l.name != names[i]
	}
	return ordered, reordered, nil
}

// firstTime is the time of the first record of the log at path, or zero
// when it has none.
func firstTime(path string, opts accesslog.Options) (time.Time, error) {
	info, err := os.Stat(path)
	if err != nil {
		return time.Time{}, err
	}
	if info.IsDir() {
		return time.Time{}, fmt.Errorf("%s is a directory", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	opts.MaxLineErrors = -1
	rd, err := accesslog.NewReader(f, opts)
	if errors.Is(err, accesslog.ErrEmpty) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %w", path, err)
	}
	rec, _ := rd.Next()
	return rec.Time, nil
}
