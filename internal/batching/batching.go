// Package batching sends decisions to a [sluice.BatchLimiter] in as few
// batches as the store takes, and gives every request its own answer. The
// decorators that batch (coalesce, for concurrent callers; lease, for its
// refills) share it, so that both treat a bad request, a failed batch and
// a Redis Cluster the same way.
//
// A batch is refused before anything is decided when one request is
// invalid ([sluice.RequestError]) or when its keys span Cluster slots
// ([sluice.ErrCrossSlot]). The Sender then gives the invalid request its
// error and sends the rest again, or splits the batch by hash tag and
// groups by hash tag from then on. Any other error is every request's
// error: the batch may or may not have been decided, as with any call
// whose reply is lost.
package batching

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice"
)

// Next is what a Sender sends to: a limiter that decides single requests
// and batches, as every Sluice algorithm's concrete type does.
type Next interface {
	sluice.Limiter
	sluice.BatchLimiter
}

// Sender sends requests to one limiter. It is safe for concurrent use.
type Sender struct {
	next  Next
	byTag atomic.Bool

	batches, batched atomic.Int64
}

// NewSender returns a Sender to next. With byTag, only keys with the same
// hash tag share a batch from the start (a go-redis Ring, which reports no
// CROSSSLOT); a Cluster is detected without it.
func NewSender(next Next, byTag bool) *Sender {
	s := &Sender{next: next}
	s.byTag.Store(byTag)
	return s
}

// ByTag reports whether batches are grouped by hash tag: asked for, or
// since a batch met a Cluster.
func (s *Sender) ByTag() bool { return s.byTag.Load() }

// Counts returns the batches sent (AllowBatch calls that were not refused
// before running) and the requests they carried.
func (s *Sender) Counts() (batches, requests int64) {
	return s.batches.Load(), s.batched.Load()
}

// Decide decides every request of reqs (1 to [sluice.MaxBatch]) and sets
// results[i], which must be as long as reqs, to request i's answer. A
// group of one is decided with AllowN. Grouped by tag, the groups go at
// the same time (up to 16), each from a goroutine of its own.
func (s *Sender) Decide(ctx context.Context, reqs []sluice.Request, results []sluice.Result) {
	if len(results) != len(reqs) {
		panic(fmt.Sprintf("batching: %d results for %d requests", len(results), len(reqs)))
	}
	at := make([]int, len(reqs))
	for i := range at {
		at[i] = i
	}
	if !s.byTag.Load() {
		s.decide(ctx, reqs, results, at)
		return
	}
	s.decideGroups(ctx, reqs, results, groupByTag(reqs, at))
}

// maxConcurrentGroups bounds the groups of one Decide sent at once: on a
// Cluster, keys of different tags are often on different nodes, and one
// after another they would cost a round trip each.
const maxConcurrentGroups = 16

// decideGroups decides each group (disjoint positions of reqs), up to
// maxConcurrentGroups at once.
func (s *Sender) decideGroups(ctx context.Context, reqs []sluice.Request, results []sluice.Result, groups [][]int) {
	if len(groups) == 1 {
		s.decide(ctx, reqs, results, groups[0])
		return
	}
	slots := make(chan struct{}, maxConcurrentGroups)
	var wg sync.WaitGroup
	var first sync.Once
	var panicked any // the first panic of a group, raised again below
	for _, g := range groups {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() {
				<-slots
				if p := recover(); p != nil {
					first.Do(func() { panicked = p })
				}
			}()
			s.decide(ctx, reqs, results, g)
		})
	}
	wg.Wait()
	if panicked != nil {
		panic(panicked)
	}
}

// decide decides the requests at the positions at (in order) of reqs.
func (s *Sender) decide(ctx context.Context, reqs []sluice.Request, results []sluice.Result, at []int) {
	if len(at) == 1 {
		r := reqs[at[0]]
		results[at[0]].Decision, results[at[0]].Err = s.next.AllowN(ctx, r.Key, r.Limit, r.N)
		return
	}
	group := reqs // at is in order, so a group as long as reqs is all of it
	if len(at) != len(reqs) {
		group = make([]sluice.Request, len(at))
		for i, j := range at {
			group[i] = reqs[j]
		}
	}
	out, err := s.next.AllowBatch(ctx, group)
	if err == nil && len(out) != len(at) {
		err = fmt.Errorf("%w: %d results for %d requests", sluice.ErrUnexpectedReply, len(out), len(at))
	}
	var reqErr *sluice.RequestError
	switch {
	case err == nil:
		s.count(len(at))
		for i, j := range at {
			results[j] = out[i]
		}
	case errors.As(err, &reqErr) && reqErr.Index >= 0 && reqErr.Index < len(at):
		// Refused before sending: that request alone is invalid.
		results[at[reqErr.Index]] = sluice.Result{Err: reqErr.Err}
		s.decide(ctx, reqs, results, append(at[:reqErr.Index:reqErr.Index], at[reqErr.Index+1:]...))
	case errors.Is(err, sluice.ErrCrossSlot) && len(groupByTag(reqs, at)) > 1:
		// Refused before running: a Cluster. Group by tag from now on.
		s.byTag.Store(true)
		s.decideGroups(ctx, reqs, results, groupByTag(reqs, at))
	default:
		s.count(len(at))
		for _, j := range at {
			results[j] = sluice.Result{Err: err}
		}
	}
}

func (s *Sender) count(requests int) {
	s.batches.Add(1)
	s.batched.Add(int64(requests))
}

// groupByTag splits the positions at into groups whose keys may share a
// batch (the same hash tag), keeping order. A key without a tag is alone.
func groupByTag(reqs []sluice.Request, at []int) [][]int {
	var groups [][]int
	index := map[string]int{}
	for _, j := range at {
		tag := HashTag(reqs[j].Key)
		if i, ok := index[tag]; ok && tag != "" {
			groups[i] = append(groups[i], j)
			continue
		}
		index[tag] = len(groups)
		groups = append(groups, []int{j})
	}
	return groups
}

// HashTag returns key's Redis hash tag, as [sluice.HashSlot] reads it, or
// "" when the whole key is hashed.
func HashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return ""
}
