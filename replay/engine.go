package replay

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/sluicehq/sluice/ext/algorithm"
	"github.com/sluicehq/sluice/replay/accesslog"
)

const batchSize = 4096

// job is one batch for one run. blocked (nil: none) marks the items an
// earlier policy stopped; stops, for a stopping policy's own run, receives
// which items it denied, and done is then signalled. Neither slice is
// written once another run may read it.
type job struct {
	batch   []item
	blocked []bool
	stops   []bool
	done    *sync.WaitGroup
}

// stage is one policy's runs, its own algorithm's first.
type stage struct {
	runs []*run
	// stopping: the policy is enforced (not a shadow) and a later policy
	// exists, so its own denials stop requests from reaching the later
	// ones, as httplimit's first denial answers.
	stopping bool
}

// Run replays src under cfg and reports what each policy and algorithm
// decided. Records are decided in the order src yields them, each at its
// logged time; a record logged earlier than one before it is decided at
// the later time (as a server clock never goes back) and counted in
// Input.OutOfOrder. A record whose time is outside 1970–2099 is skipped and
// reported with its line.
//
// Policies apply in order, as httplimit applies them: a request that an
// enforced policy denies under its own algorithm never reaches the
// policies after it (Input.Stopped counts them); a shadow policy
// (Policy.Shadow) stops nothing. A policy's alternatives see the same
// requests as its own algorithm. Subjects run concurrently, one goroutine
// each, and the log is read by another.
//
// The error is about cfg, src's I/O (Source.Err), or ctx, and then no
// report is returned. When ctx ends while src.Next blocks (a terminal on
// standard input), Run returns at once; the goroutine reading src ends
// when Next returns.
func Run(ctx context.Context, src Source, cfg Config) (*Report, error) {
	subjects, routes, err := cfg.check()
	if err != nil {
		return nil, err
	}
	runs := make([]*run, len(subjects))
	var stages []stage
	var workers sync.WaitGroup
	for i, sub := range subjects {
		r := newRun(sub, cfg.Policies[sub.policy], &cfg)
		runs[i] = r
		if n := len(stages); n == 0 || stages[n-1].runs[0].sub.policy != sub.policy {
			stages = append(stages, stage{stopping: !cfg.Policies[sub.policy].Shadow && sub.policy < len(cfg.Policies)-1})
		}
		stages[len(stages)-1].runs = append(stages[len(stages)-1].runs, r)
		workers.Add(1)
		go func() {
			defer workers.Done()
			for j := range r.jobs {
				r.feed(j.batch, j.blocked, j.stops)
				if j.done != nil {
					j.done.Done()
				}
			}
		}()
	}
	stopWorkers := func() {
		for _, r := range runs {
			close(r.jobs)
		}
		workers.Wait()
	}

	rd := &reader{src: src, routes: routes, cfg: &cfg, ctx: ctx, batches: make(chan []item, 2)}
	go rd.read()
	var in Input
	for {
		var batch []item
		var ok bool
		select {
		case <-ctx.Done():
			stopWorkers()
			return nil, fmt.Errorf("replay: %w", ctx.Err())
		case batch, ok = <-rd.batches:
		}
		if !ok {
			break
		}
		// Only a stopping policy's own run is waited for, and only by the
		// policies after it; everything else runs ahead.
		var blocked []bool
		for _, st := range stages {
			var stops []bool
			var done sync.WaitGroup
			if st.stopping {
				stops = make([]bool, len(batch))
				done.Add(1)
			}
			for i, r := range st.runs {
				j := job{batch: batch, blocked: blocked}
				if i == 0 && st.stopping {
					j.stops, j.done = stops, &done
				}
				r.jobs <- j
			}
			if st.stopping {
				done.Wait()
				next := make([]bool, len(batch))
				for i := range next {
					was := blocked != nil && blocked[i]
					next[i] = was || stops[i]
					if stops[i] && !was {
						in.Stopped++
					}
				}
				blocked = next
			}
		}
	}
	stopWorkers()
	rd.in.Stopped = in.Stopped
	in = rd.in
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if err := src.Err(); err != nil {
		return nil, fmt.Errorf("replay: reading the log: %w", err)
	}
	for _, r := range runs {
		if r.err != nil {
			return nil, r.err
		}
	}
	if s, ok := src.(Skipper); ok {
		n, lines := s.Skipped()
		in.Skipped += n
		in.SkippedLines = append(lines, in.SkippedLines...)
	}
	if f, ok := src.(interface{ Format() accesslog.Format }); ok {
		in.Format = f.Format().String()
	}
	return newReport(in, runs, &cfg), nil
}

// reader reads src into batches of items, in its own goroutine; in is
// complete once batches is closed.
type reader struct {
	src     Source
	routes  *routeMatcher
	cfg     *Config
	ctx     context.Context
	batches chan []item
	in      Input
}

func (rd *reader) read() {
	defer close(rd.batches)
	in := &rd.in
	every := rd.cfg.ProgressEvery
	if every == 0 {
		every = 1 << 16
	}
	last := int64(math.MinInt64)
	batch := make([]item, 0, batchSize)
	send := func() bool {
		select {
		case rd.batches <- batch:
			batch = make([]item, 0, batchSize)
			return true
		case <-rd.ctx.Done():
			return false
		}
	}
	for rd.ctx.Err() == nil {
		rec, ok := rd.src.Next()
		if !ok {
			break
		}
		now := rec.Time.UnixMicro()
		if rec.Time.IsZero() || now < 0 || now > algorithm.MaxNowMicros {
			in.addSkipped(accesslog.LineError{Line: rec.Line, Reason: fmt.Sprintf("time %s is outside 1970-2099", rec.Time.Format(time.RFC3339))})
			continue
		}
		mask := rd.routes.match(&rec)
		if rec.Keys != nil {
			var refused string
			if mask, refused = rd.keyed(mask, rec.Keys); refused != "" {
				in.addSkipped(accesslog.LineError{Line: rec.Line, Reason: refused})
				continue
			}
		}
		in.Records++
		if now < last {
			in.OutOfOrder++
			now = last
		}
		last = now
		if in.First.IsZero() {
			in.First = rec.Time.UTC()
		}
		in.Last = time.UnixMicro(now).UTC()
		if mask == 0 {
			in.Unmatched++
		} else {
			batch = append(batch, item{key: rec.Key, keys: rec.Keys, now: now, cost: rec.Cost, line: rec.Line, policies: mask,
				method: rec.Method, path: rec.Path, route: rec.Route})
			if len(batch) == batchSize && !send() {
				return
			}
		}
		if rd.cfg.Progress != nil && in.Records%every == 0 && rd.ctx.Err() == nil {
			rd.cfg.Progress(Progress{Records: in.Records, Skipped: in.Skipped + sourceSkipped(rd.src)})
		}
	}
	if len(batch) > 0 {
		send()
	}
}

// keyed checks that a record with several keys has the key of each
// policy of mask, as httplimit needs: a policy that applies and is
// enforced, without its key, refuses the request (400) before any policy
// counts it, and the line is skipped for that reason; a shadow one
// without its key only leaves mask.
func (rd *reader) keyed(mask uint64, keys []string) (uint64, string) {
	for i, p := range rd.cfg.Policies {
		bit := uint64(1) << i
		if mask&bit == 0 || p.KeyIndex < len(keys) && keys[p.KeyIndex] != "" {
			continue
		}
		if !p.Shadow {
			return 0, fmt.Sprintf("no key for policy %q, which would refuse the request (400)", p.Name)
		}
		mask &^= bit
	}
	return mask, ""
}

func sourceSkipped(src Source) int64 {
	if s, ok := src.(Skipper); ok {
		n, _ := s.Skipped()
		return n
	}
	return 0
}
