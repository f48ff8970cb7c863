// Package coalesce decides concurrent calls together: while a limiter's
// calls are in flight, the calls that arrive meanwhile wait and then go to
// the store as one batch ([sluice.BatchLimiter]), one script call for up to
// [sluice.MaxBatch] decisions.
//
// [New] wraps a limiter that takes batches ([sluice.BatchLimiter]: every
// Sluice algorithm, or a decorator over one) and refuses any other. No
// timer: a call goes straight through while fewer than [WithMaxInFlight]
// calls are in flight (default [DefaultMaxInFlightPerCPU] × GOMAXPROCS), so a lone caller
// waits for nothing; when all are busy calls queue, and leave together as
// one finishes. See Example, Example_concurrent and Example_refund.
//
// Every request is decided exactly as the wrapped limiter's AllowN would
// decide it, in arrival order, each batch at one instant of the store's
// clock. A denial is still a Decision, an invalid request gets its own
// error while the others are decided, and a batch that fails fails each of
// its calls with that error.
// AllowBatch, Refund, Reset, Capacity, Lease, Release and LeaseBatch pass
// unchanged.
//
// On Redis Cluster a batch's keys must share a slot: the decorator detects
// a Cluster and then batches only keys of one hash tag ([sluice.Key] writes
// one; a key without one is decided alone). On a go-redis Ring, give
// [WithHashTagGroups]. A batch runs until the latest of its callers' deadlines; a
// caller whose context ends while it waits returns at once, though a
// request that already left with a batch may still have been decided.
package coalesce

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/ext/batching"
)

// DefaultMaxInFlightPerCPU sets how many calls to the wrapped limiter may
// be in flight at once, unless [WithMaxInFlight] says otherwise: this many
// per CPU (GOMAXPROCS when New runs), enough to keep a connection busy
// while batches form. Under load, fewer calls in flight make larger
// batches, which cost Redis less per decision: bench/runs/coalesce-inflight.txt
// measures bounds of 1 to 16 calls on 2 CPUs.
const DefaultMaxInFlightPerCPU = 2

// Option configures a [Limiter]. A nil Option is an error, as is an
// option given a bad value.
type Option func(*config) error

type config struct {
	maxInFlight int
	maxBatch    int
	byTag       bool
}

// WithMaxInFlight bounds the calls in flight to the wrapped limiter at
// once (at least 1; default [DefaultMaxInFlightPerCPU] × GOMAXPROCS). Beyond it, calls queue
// and leave together as the next batch: fewer means larger batches and
// more waiting, more means smaller batches. With go-redis, keep it at or
// below the client's pool size.
func WithMaxInFlight(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("coalesce: WithMaxInFlight(%d): must be at least 1", n)
		}
		c.maxInFlight = n
		return nil
	}
}

// WithMaxBatch caps the requests in one batch, from 2 to [sluice.MaxBatch]
// (the default).
func WithMaxBatch(n int) Option {
	return func(c *config) error {
		if n < 2 || n > sluice.MaxBatch {
			return fmt.Errorf("coalesce: WithMaxBatch(%d): must be 2 to %d", n, sluice.MaxBatch)
		}
		c.maxBatch = n
		return nil
	}
}

// WithHashTagGroups groups requests by their key's hash tag from the start: only
// keys with the same tag share a batch, and a key without a tag goes alone.
// Give it with a go-redis Ring; a Cluster is detected without it.
func WithHashTagGroups() Option {
	return func(c *config) error {
		c.byTag = true
		return nil
	}
}

// Limiter decides concurrent AllowN calls in shared batches, each exactly
// as the limiter it wraps would decide it alone. It forwards AllowBatch,
// Refund, Reset, Capacity, Lease, Release and LeaseBatch unchanged (not
// batched), and serves every capability the wrapped limiter serves (see
// [sluice.As]). It is safe for
// concurrent use.
type Limiter struct {
	next        sluice.Limiter
	batch       sluice.BatchLimiter // next's
	maxInFlight int
	maxBatch    int
	sender      *batching.Sender // sends batches, and knows whether to group them by hash tag

	mu       sync.Mutex
	inFlight int       // calls to next in flight, at most maxInFlight
	queue    []*waiter // arrival order; non-empty only when inFlight == maxInFlight

	calls atomic.Int64
}

// New returns a Limiter that coalesces calls to next, which must take
// batches ([sluice.BatchLimiter]), as every Sluice algorithm does.
func New(next sluice.Limiter, opts ...Option) (*Limiter, error) {
	batch, err := ext.Require[sluice.BatchLimiter]("coalesce", next)
	if err != nil {
		return nil, err
	}
	c := config{maxInFlight: DefaultMaxInFlightPerCPU * runtime.GOMAXPROCS(0), maxBatch: sluice.MaxBatch}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("coalesce: option %d is nil", i)
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	return &Limiter{next: next, batch: batch, maxInFlight: c.maxInFlight, maxBatch: c.maxBatch,
		sender: batching.NewSender(next, batch, c.byTag)}, nil
}

// waiter is one queued call.
type waiter struct {
	ctx context.Context
	req sluice.Request
	tag string // the key's hash tag, "" for none
	// done receives once: the result is in res, or, when lead is non-nil,
	// the waiter must decide that batch (itself first) for everyone.
	done chan struct{}
	lead []*waiter
	res  sluice.Result
	// state is guarded by Limiter.mu.
	state waiterState
}

type waiterState uint8

const (
	queued  waiterState = iota
	taken               // in a batch that someone else decides
	leading             // deciding a batch
)

// AllowN decides one request: at once when a call slot is free, else with
// the next batch.
func (l *Limiter) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	if ctx == nil {
		return sluice.Decision{}, sluice.ErrNilContext
	}
	if err := ctx.Err(); err != nil {
		return sluice.Decision{}, err
	}
	l.calls.Add(1)
	l.mu.Lock()
	if l.inFlight < l.maxInFlight {
		l.inFlight++
		l.mu.Unlock()
		return l.direct(ctx, key, limit, n)
	}
	w := waiterPool.Get().(*waiter)
	w.ctx, w.req, w.tag = ctx, sluice.Request{Key: key, Limit: limit, N: n}, ext.HashTag(key)
	l.queue = append(l.queue, w)
	l.mu.Unlock()

	select {
	case <-w.done:
	case <-ctx.Done():
		l.mu.Lock()
		state := w.state
		if state == queued {
			l.dequeue(w)
		}
		l.mu.Unlock()
		switch state {
		case queued: // never sent: nobody refers to w any more
			recycle(w)
			return sluice.Decision{}, ctx.Err()
		case taken:
			select {
			case <-w.done: // the result came in the meantime: use it
			default:
				// The batch still runs and will send on done (buffered):
				// w is not recycled.
				return sluice.Decision{}, ctx.Err()
			}
		case leading:
			<-w.done // the others wait on this batch
		}
	}
	if w.lead != nil {
		l.lead(w.lead)
	}
	d, err := w.res.Decision, w.res.Err
	recycle(w)
	return d, err
}

// direct decides one request on next, holding an in-flight slot.
func (l *Limiter) direct(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	defer l.release()
	return l.next.AllowN(ctx, key, limit, n)
}

// lead decides the batch the caller was handed, then passes its slot on.
func (l *Limiter) lead(batch []*waiter) {
	defer l.release()
	l.decide(batch)
}

// recycle puts a waiter back in the pool. Only a waiter that nothing will
// send to again may go back: one whose result arrived, or one that left the
// queue before any batch took it.
func recycle(w *waiter) {
	*w = waiter{done: w.done}
	waiterPool.Put(w)
}

// waiterPool recycles waiters (and their channels): a busy limiter queues
// a waiter for most calls.
var waiterPool = sync.Pool{New: func() any { return &waiter{done: make(chan struct{}, 1)} }}

// AllowBatch passes a caller's own batch to the wrapped limiter.
func (l *Limiter) AllowBatch(ctx context.Context, reqs []sluice.Request) ([]sluice.Result, error) {
	if ctx == nil {
		return nil, sluice.ErrNilContext
	}
	return l.batch.AllowBatch(ctx, reqs)
}

// As finds the optional interfaces the wrapped limiter serves (see
// [sluice.As]): the Limiter serves them too, through itself.
func (l *Limiter) As(target any) bool { return ext.Forward(target, l.next, forwarded{l}) }

// forwarded holds the methods of the optional interfaces, served only
// when the wrapped limiter serves them.
type forwarded struct{ *Limiter }

// Refund passes a refund straight to the wrapped limiter (refunds are
// rare; they are not batched).
func (l forwarded) Refund(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	if ctx == nil {
		return sluice.Decision{}, sluice.ErrNilContext
	}
	inner, err := ext.Require[sluice.Refunder]("coalesce", l.next)
	if err != nil {
		return sluice.Decision{}, err
	}
	return inner.Refund(ctx, key, limit, n)
}

// Reset passes a reset straight to the wrapped limiter.
func (l forwarded) Reset(ctx context.Context, key string) error {
	if ctx == nil {
		return sluice.ErrNilContext
	}
	inner, err := ext.Require[sluice.Resetter]("coalesce", l.next)
	if err != nil {
		return err
	}
	return inner.Reset(ctx, key)
}

// Capacity returns the wrapped limiter's capacity: coalescing changes no
// decision.
func (l forwarded) Capacity(key string, limit sluice.Limit) (int64, error) {
	return ext.Capacity(l.next, key, limit)
}

// Lease passes a lease request straight to the wrapped limiter: leases
// are not batched (a lease decorator already makes them rare).
func (l forwarded) Lease(ctx context.Context, req ext.LeaseRequest) (ext.Grant, error) {
	if ctx == nil {
		return ext.Grant{}, sluice.ErrNilContext
	}
	inner, err := ext.Require[ext.Leaser]("coalesce", l.next)
	if err != nil {
		return ext.Grant{}, err
	}
	return inner.Lease(ctx, req)
}

// LeaseBatch passes many lease requests, takes and releases alike,
// straight to the wrapped limiter, in one call.
func (l forwarded) LeaseBatch(ctx context.Context, reqs []ext.LeaseRequest) ([]ext.LeaseResult, error) {
	if ctx == nil {
		return nil, sluice.ErrNilContext
	}
	inner, err := ext.Require[ext.LeaseBatcher]("coalesce", l.next)
	if err != nil {
		return nil, err
	}
	return inner.LeaseBatch(ctx, reqs)
}

// Release passes a release straight to the wrapped limiter.
func (l forwarded) Release(ctx context.Context, key string, limit sluice.Limit, holder, unspent int64) (sluice.Decision, error) {
	if ctx == nil {
		return sluice.Decision{}, sluice.ErrNilContext
	}
	inner, err := ext.Require[ext.Leaser]("coalesce", l.next)
	if err != nil {
		return sluice.Decision{}, err
	}
	return inner.Release(ctx, key, limit, holder, unspent)
}

var (
	_ sluice.BatchLimiter = forwarded{}
	_ sluice.Refunder     = forwarded{}
	_ sluice.Resetter     = forwarded{}
	_ sluice.Bounded      = forwarded{}
	_ ext.Leaser          = forwarded{}
	_ ext.LeaseBatcher    = forwarded{}
)

// Stats counts what the Limiter did since New.
type Stats struct {
	// Calls is the AllowN calls made to the Limiter.
	Calls int64
	// Batches is the batches sent (AllowBatch calls of two requests or
	// more); Batched the requests they carried.
	Batches, Batched int64
	// Queued is how many calls wait for a batch now.
	Queued int
	// ByHashTag says batches are grouped by hash tag: given with
	// [WithHashTagGroups], or since a batch met a Cluster.
	ByHashTag bool
}

// Stats returns the counts so far, and the calls queued now.
func (l *Limiter) Stats() Stats {
	batches, batched := l.sender.Counts()
	l.mu.Lock()
	queued := len(l.queue)
	l.mu.Unlock()
	return Stats{Calls: l.calls.Load(), Batches: batches, Batched: batched, Queued: queued, ByHashTag: l.sender.ByTag()}
}

// release ends a call to next: its slot goes to the next batch, if any.
// The slot is handed over, not freed: inFlight stays at maxInFlight while
// calls queue, and the batch's first waiter (its leader) decides the batch
// for everyone from its own goroutine, then releases the slot in turn. So
// batches form only while every slot is busy, and no timer is needed.
func (l *Limiter) release() {
	l.mu.Lock()
	if len(l.queue) == 0 {
		l.inFlight--
		l.mu.Unlock()
		return
	}
	batch := l.take()
	l.mu.Unlock()
	batch[0].lead = batch
	batch[0].done <- struct{}{}
}

// take removes the next batch from the queue: the oldest waiter and, up
// to maxBatch, the waiters that may share its batch. The caller holds mu.
func (l *Limiter) take() []*waiter {
	first := l.queue[0]
	if !l.sender.ByTag() {
		n := min(len(l.queue), l.maxBatch)
		batch := make([]*waiter, n)
		copy(batch, l.queue)
		left := copy(l.queue, l.queue[n:])
		clear(l.queue[left:])
		l.queue = l.queue[:left]
		return l.mark(batch)
	}
	batch := []*waiter{first}
	rest := l.queue[:0]
	for _, w := range l.queue[1:] {
		if first.tag != "" && w.tag == first.tag && len(batch) < l.maxBatch {
			batch = append(batch, w)
		} else {
			rest = append(rest, w)
		}
	}
	clear(l.queue[len(rest):])
	l.queue = rest
	return l.mark(batch)
}

func (l *Limiter) mark(batch []*waiter) []*waiter {
	batch[0].state = leading
	for _, w := range batch[1:] {
		w.state = taken
	}
	return batch
}

// dequeue removes a waiter that gave up. The caller holds mu.
func (l *Limiter) dequeue(w *waiter) {
	for i, q := range l.queue {
		if q == w {
			last := len(l.queue) - 1
			copy(l.queue[i:], l.queue[i+1:])
			l.queue[last] = nil
			l.queue = l.queue[:last]
			return
		}
	}
}

// decide decides batch (whose first waiter is the caller) and hands every
// other waiter its result.
func (l *Limiter) decide(batch []*waiter) {
	defer func() {
		// If the wrapped limiter panics, every other waiter is still
		// answered (with an error) before the panic goes on, so that none
		// waits for ever.
		if p := recover(); p != nil {
			err := fmt.Errorf("coalesce: the wrapped limiter panicked: %v", p)
			for _, w := range batch[1:] {
				w.res = sluice.Result{Err: err}
				w.done <- struct{}{}
			}
			panic(p)
		}
	}()
	ctx, cancel := batchContext(batch)
	defer cancel()
	l.decideGroup(ctx, batch)
	for _, w := range batch[1:] {
		w.done <- struct{}{}
	}
}

// decideGroup sets the result of every waiter of group.
func (l *Limiter) decideGroup(ctx context.Context, group []*waiter) {
	reqs := make([]sluice.Request, len(group))
	for i, w := range group {
		reqs[i] = w.req
	}
	results := make([]sluice.Result, len(group))
	l.sender.Decide(ctx, reqs, results)
	for i, w := range group {
		w.res = results[i]
	}
}

// batchContext is the context a batch runs under: the first waiter's
// values, no cancellation, and the latest deadline of its waiters (none if
// one of them has none).
func batchContext(batch []*waiter) (context.Context, context.CancelFunc) {
	ctx := context.WithoutCancel(batch[0].ctx)
	var latest time.Time
	for _, w := range batch {
		d, ok := w.ctx.Deadline()
		if !ok {
			return ctx, func() {}
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(ctx, latest)
}
