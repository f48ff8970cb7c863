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

// Run replays src under cfg and reports what each policy and algorithm
// decided. Records are decided in the order src yields them, each at its
// logged time; a record logged earlier than one before it is decided at
// the later time (as a server clock never goes back) and counted in
// Input.OutOfOrder. A record whose time is outside 1970–2099 is skipped and
// reported with its line. Subjects run concurrently, one goroutine each.
// The error is about cfg, src's I/O (Source.Err), or ctx, and then no
// report is returned.
func Run(ctx context.Context, src Source, cfg Config) (*Report, error) {
	subjects, routes, err := cfg.check()
	if err != nil {
		return nil, err
	}
	runs := make([]*run, len(subjects))
	feeds := make([]chan []item, len(subjects))
	var wg sync.WaitGroup
	for i, sub := range subjects {
		runs[i] = newRun(sub, cfg.Policies[sub.policy], &cfg)
		feeds[i] = make(chan []item, 4)
		wg.Add(1)
		go func(r *run, feed <-chan []item) {
			defer wg.Done()
			for batch := range feed {
				r.feed(batch)
			}
		}(runs[i], feeds[i])
	}

	in := Input{}
	every := cfg.ProgressEvery
	if every == 0 {
		every = 1 << 16
	}
	last := int64(math.MinInt64)
	batch := make([]item, 0, batchSize)
	send := func() {
		for _, f := range feeds {
			f <- batch
		}
		batch = make([]item, 0, batchSize)
	}
	for ctx.Err() == nil {
		rec, ok := src.Next()
		if !ok {
			break
		}
		now := rec.Time.UnixMicro()
		if rec.Time.IsZero() || now < 0 || now > algorithm.MaxNowMicros {
			in.addSkipped(accesslog.LineError{Line: rec.Line, Reason: fmt.Sprintf("time %s is outside 1970-2099", rec.Time.Format(time.RFC3339))})
			continue
		}
		in.Records++
		if now < last {
			in.OutOfOrder++
			now = last
		}
		last = now
		if in.First.IsZero() {
			in.First = rec.Time
		}
		in.Last = time.UnixMicro(now).UTC()
		mask := routes.match(&rec)
		if mask == 0 {
			in.Unmatched++
		} else {
			batch = append(batch, item{key: rec.Key, now: now, cost: rec.Cost, line: rec.Line, policies: mask,
				method: rec.Method, path: rec.Path, route: rec.Route})
			if len(batch) == batchSize {
				send()
			}
		}
		if cfg.Progress != nil && in.Records%every == 0 {
			cfg.Progress(Progress{Records: in.Records, Skipped: in.Skipped + sourceSkipped(src)})
		}
	}
	if len(batch) > 0 {
		send()
	}
	for _, f := range feeds {
		close(f)
	}
	wg.Wait()
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

func sourceSkipped(src Source) int64 {
	if s, ok := src.(Skipper); ok {
		n, _ := s.Skipped()
		return n
	}
	return 0
}
