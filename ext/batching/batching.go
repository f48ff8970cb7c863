// Package batching sends decisions (to a [sluice.BatchLimiter]) and lease
// requests, takes and releases (to a bucket algorithm's LeaseBatch), in as
// few batches as the store takes, and gives every request its own answer.
// The decorators that batch (coalesce and shard, for decisions; lease, for
// its refills and releases) share it, so that all treat a bad request, a
// failed batch and a Redis Cluster the same way.
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
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
)

// Batcher sends requests of type Q, each answered by an R, alone or in
// batches. It is safe for concurrent use.
type Batcher[Q, R any] struct {
	one  func(context.Context, Q) R
	many func(context.Context, []Q) ([]R, error)
	key  func(Q) string // the request's Redis key, for its hash tag
	fail func(error) R  // the answer of a request that got none

	byTag atomic.Bool

	batches, batched atomic.Int64
}

// Sender sends decisions to one limiter.
type Sender = Batcher[sluice.Request, sluice.Result]

// LeaseSender sends lease requests to one limiter.
type LeaseSender = Batcher[ext.LeaseRequest, ext.LeaseResult]

// NewSender returns a Sender to next, whose batches go to batch (next's
// [sluice.BatchLimiter], as [sluice.As] finds it). With byTag, only keys
// with the same hash tag share a batch from the start (a go-redis Ring,
// which reports no CROSSSLOT); a Cluster is detected without it.
func NewSender(next sluice.Limiter, batch sluice.BatchLimiter, byTag bool) *Sender {
	s := &Sender{
		one: func(ctx context.Context, r sluice.Request) sluice.Result {
			d, err := next.AllowN(ctx, r.Key, r.Limit, r.N)
			return sluice.Result{Decision: d, Err: err}
		},
		many: batch.AllowBatch,
		key:  func(r sluice.Request) string { return r.Key },
		fail: func(err error) sluice.Result { return sluice.Result{Err: err} },
	}
	s.byTag.Store(byTag)
	return s
}

// NewLeaseSender returns a LeaseSender to next, whose batches go to
// batch, as NewSender's. A request sent alone goes to next's Lease, or a
// release ([ext.LeaseRequest.Release]) to its Release.
func NewLeaseSender(next ext.Leaser, batch ext.LeaseBatcher, byTag bool) *LeaseSender {
	s := &LeaseSender{
		one: func(ctx context.Context, r ext.LeaseRequest) ext.LeaseResult {
			if r.Release {
				d, err := next.Release(ctx, r.Key, r.Limit, r.Holder, r.Unspent)
				return ext.LeaseResult{Grant: ext.Grant{Decision: d}, Err: err}
			}
			g, err := next.Lease(ctx, r)
			return ext.LeaseResult{Grant: g, Err: err}
		},
		many: batch.LeaseBatch,
		key:  func(r ext.LeaseRequest) string { return r.Key },
		fail: func(err error) ext.LeaseResult { return ext.LeaseResult{Err: err} },
	}
	s.byTag.Store(byTag)
	return s
}

// ByTag reports whether batches are grouped by hash tag: asked for, or
// since a batch met a Cluster.
func (s *Batcher[Q, R]) ByTag() bool { return s.byTag.Load() }

// Counts returns the batches sent (calls that were not refused before
// running) and the requests they carried.
func (s *Batcher[Q, R]) Counts() (batches, requests int64) {
	return s.batches.Load(), s.batched.Load()
}

// Decide decides every request of reqs (1 to [sluice.MaxBatch]) and sets
// results[i], which must be as long as reqs, to request i's answer. A
// group of one is sent alone. Grouped by tag, the groups go at the same
// time (up to 16), each from a goroutine of its own.
func (s *Batcher[Q, R]) Decide(ctx context.Context, reqs []Q, results []R) {
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
	s.decideGroups(ctx, reqs, results, s.groupByTag(reqs, at))
}

// maxConcurrentGroups bounds the groups of one Decide sent at once: on a
// Cluster, keys of different tags are often on different nodes, and one
// after another they would cost a round trip each.
const maxConcurrentGroups = 16

// decideGroups decides each group (disjoint positions of reqs), up to
// maxConcurrentGroups at once.
func (s *Batcher[Q, R]) decideGroups(ctx context.Context, reqs []Q, results []R, groups [][]int) {
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
func (s *Batcher[Q, R]) decide(ctx context.Context, reqs []Q, results []R, at []int) {
	if len(at) == 1 {
		results[at[0]] = s.one(ctx, reqs[at[0]])
		return
	}
	group := reqs // at is in order, so a group as long as reqs is all of it
	if len(at) != len(reqs) {
		group = make([]Q, len(at))
		for i, j := range at {
			group[i] = reqs[j]
		}
	}
	out, err := s.many(ctx, group)
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
		results[at[reqErr.Index]] = s.fail(reqErr.Err)
		s.decide(ctx, reqs, results, append(at[:reqErr.Index:reqErr.Index], at[reqErr.Index+1:]...))
	case errors.Is(err, sluice.ErrCrossSlot) && len(s.groupByTag(reqs, at)) > 1:
		// Refused before running: a Cluster. Group by tag from now on.
		s.byTag.Store(true)
		s.decideGroups(ctx, reqs, results, s.groupByTag(reqs, at))
	default:
		s.count(len(at))
		for _, j := range at {
			results[j] = s.fail(err)
		}
	}
}

func (s *Batcher[Q, R]) count(requests int) {
	s.batches.Add(1)
	s.batched.Add(int64(requests))
}

// groupByTag splits the positions at into groups whose keys may share a
// batch (the same hash tag), keeping order. A key without a tag is alone.
func (s *Batcher[Q, R]) groupByTag(reqs []Q, at []int) [][]int {
	var groups [][]int
	index := map[string]int{}
	for _, j := range at {
		tag := ext.HashTag(s.key(reqs[j]))
		if i, ok := index[tag]; ok && tag != "" {
			groups[i] = append(groups[i], j)
			continue
		}
		index[tag] = len(groups)
		groups = append(groups, []int{j})
	}
	return groups
}
