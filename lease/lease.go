// Package lease takes tokens from a shared limit in batches and spends them
// in process, so that most decisions cost no round trip to Redis, without
// letting the processes together admit more than the limit.
//
// [New] wraps a limiter that leases ([ext.Leaser]: the token bucket or
// GCRA, or a decorator over one) and refuses any other, a lease included.
// [WithSize] sets B, the tokens a lease asks for (default [DefaultSize]);
// a busy key's lease grows up to [WithMaxSize], and a process holds fewer
// than 2 × that of a key. [WithHold] sets how long leased tokens may be
// spent before they are released; [WithHashTagGroups] is for a go-redis Ring.
// [WithHotKeys] and [WithPredicate] lease only the keys they choose (as
// shard.WithHotKeys does); every other key is decided by the wrapped
// limiter on each request.
// [Limiter.Close] releases every lease, giving back what was not spent;
// later calls return [ErrClosed]. Example shows a lease taken, spent,
// refunded into and released.
//
// Leased tokens stay reserved in the shared state until the process reports
// them spent, releases them or the hold ends, so N leasing processes admit
// at most Burst + Rate × T over any interval T: the unleased limiter's
// bound, whatever N, B, the hold, or how long a lease sat idle. Every
// process using the key must go through a lease.Limiter: a plain AllowN on
// the same key does not see reservations. The cost is that tokens in a
// lease, or spent from it but not yet reported, are unavailable to other
// processes until the next report or the release; a process that dies
// leaves its reservation to expire.
//
// A decision from the lease is local: Allowed is exact, and Remaining and
// ResetAfter are estimates marked [sluice.Decision.Estimated]. A denial, a
// peek, a request of cost above B and a key's first request are decided by
// the shared limit, reservations included.
package lease

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/ext/batching"
)

// Defaults, each overridable with an option.
const (
	// DefaultSize is B, how many tokens a lease asks for at a time.
	DefaultSize = 100
	// maxGrow is how many times B a busy key's lease grows to, unless
	// WithMaxSize says otherwise.
	maxGrow = 8
	// DefaultHold is how long a lease's tokens may be spent before they
	// are released.
	DefaultHold = time.Second
	// requestTimeout bounds a request made in the background.
	requestTimeout = time.Second
)

// Limiter leases tokens from a shared limit. It is safe for concurrent use;
// Close it to release what it holds and stop its janitor.
//
// It serves refunds (into the lease first, then to the wrapped limiter)
// and resets whenever the limiter it wraps does (see [sluice.As]), and
// always serves batches (each request as AllowN) and Capacity (the
// wrapped limiter's). It does not lease to a decorator above it.
type Limiter struct {
	next     sluice.Limiter
	leaser   ext.Leaser
	batch    int64 // B
	maxBatch int64 // the largest a lease grows
	hold     time.Duration
	margin   time.Duration   // a lease stops being spent this long before the store's reservation ends
	holder   int64           // this Limiter's name in the shared ledgers
	hot      ext.KeySelector // the keys leased; the others go to next

	// The Limiter's clock is nanoseconds since base, read from clock.
	clock sluice.Clock
	base  time.Time

	leases sync.Map // key string -> *lease
	closed atomic.Bool

	opsMu    sync.Mutex
	stopping bool           // Close has begun: no request starts
	ops      sync.WaitGroup // requests and releases in flight

	requests, releases, sweeps atomic.Int64

	// sender sends lease requests in batches when next takes them (the
	// bucket algorithms' LeaseBatch); nil sends each alone.
	sender  *batching.LeaseSender
	queueMu sync.Mutex
	queue   []*pending // requests waiting for a batch, oldest first
	senders int        // goroutines sending batches, at most maxSenders

	// The janitor sleeps until armed (the Limiter's clock), the earliest
	// time a lease must be released or forgotten; wake tells it of an
	// earlier one. Nothing armed (math.MaxInt64): it sleeps until woken.
	armed   atomic.Int64
	wake    chan struct{}
	stop    chan struct{}
	stopped sync.WaitGroup
}

// lease is a key's tokens, taken under one limit. A request under another
// limit for the same key replaces it (releasing it).
type lease struct {
	key      string
	limit    sluice.Limit
	capacity int64         // the largest cost the limit allows
	interval time.Duration // Period / Rate: the time one token takes to refill

	mu       sync.Mutex
	tokens   int64 // left to spend
	reserved int64 // what the shared ledger reserves for this process (>= tokens)
	deadline int64 // tokens may be spent before it (the Limiter's clock)
	size     int64 // how many to ask for next
	// grow is the lease's size over B: doubled when the process spent a
	// whole lease before the next arrived, halved when one arrives to a
	// lease still holding a whole size; 1 to maxGrow.
	grow int64
	dry  bool // a call found the lease short while the next was on its way
	// busy is closed when the request or release in flight ends; nil
	// when none is.
	busy chan struct{}
	// round counts the requests made; denial is the last one's, if it
	// was denied: calls that waited for it and need as much are denied too.
	round    uint64
	denial   *denial
	remain   int64 // what the shared limit had left at the last answer
	resetAt  int64 // when the shared limit was to be full, at the last answer
	replaced bool  // no longer in the map: spend nothing more from it
}

type denial struct {
	round uint64
	cost  int64
	d     sluice.Decision
}

// New returns a Limiter leasing from next, which must serve leases
// ([ext.Leaser]: the token bucket and GCRA, or a decorator over one).
// It starts one janitor goroutine that releases expired leases; Close
// stops it. It does no I/O.
func New(next sluice.Limiter, opts ...Option) (*Limiter, error) {
	leaser, err := ext.Require[ext.Leaser]("lease", next)
	if err != nil {
		return nil, err
	}
	c := config{batch: DefaultSize, hold: DefaultHold, clock: sluice.SystemClock{}}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("lease: option %d is nil", i)
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	switch {
	case c.maxBatch == 0:
		c.maxBatch = maxGrow * c.batch
	case c.maxBatch < c.batch:
		return nil, fmt.Errorf("lease: WithMaxSize(%d) is below WithSize(%d)", c.maxBatch, c.batch)
	}
	l := &Limiter{
		next: next, leaser: leaser, batch: c.batch, maxBatch: c.maxBatch, hold: c.hold,
		// The local clock starts before the store's, and the janitor
		// releases within a tick of the deadline: an eighth of the hold
		// leaves time for the release to arrive while the store still
		// reserves the tokens, so that they go back at once.
		margin: max(c.hold/8, 5*time.Millisecond),
		clock:  c.clock,
		base:   c.clock.Now(),
		// At most 2^53, so that the lease scripts get it packed with
		// the other numbers (sluice.Script.Args).
		holder: 1 + rand.Int64N(1<<53),
		wake:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
	}
	l.armed.Store(math.MaxInt64)
	if c.hotChosen {
		if l.hot, err = ext.SelectKeys(c.hotKeys, c.hotPred); err != nil {
			return nil, fmt.Errorf("lease: %w", err)
		}
	}
	if b, ok := sluice.As[ext.LeaseBatcher](next); ok {
		l.sender = batching.NewLeaseSender(leaser, b, c.byTag)
	}
	l.stopped.Go(l.janitor)
	return l, nil
}

// now reads the Limiter's clock.
func (l *Limiter) now() int64 { return int64(l.clock.Now().Sub(l.base)) }

// since is t on the Limiter's clock.
func (l *Limiter) since(t time.Time) int64 { return int64(t.Sub(l.base)) }

// ErrClosed is returned by a Limiter after Close.
var ErrClosed = errors.New("lease: limiter closed")

// AllowN decides n against key's limit: from the process's lease when it
// holds n, else by the shared limit.
func (l *Limiter) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	if ctx == nil {
		return sluice.Decision{}, sluice.ErrNilContext
	}
	if err := ext.ValidateKey(key); err != nil {
		return sluice.Decision{}, fmt.Errorf("lease: %w", err)
	}
	if l.closed.Load() {
		return sluice.Decision{}, ErrClosed
	}
	if !l.hot.Selects(key) {
		return l.next.AllowN(ctx, key, limit, n) // not a hot key: as without the decorator
	}
	le, err := l.leaseFor(key, limit)
	if err != nil {
		return sluice.Decision{}, err
	}
	if n < 0 || n > le.capacity {
		return sluice.Decision{}, fmt.Errorf("lease: %w", ext.CheckRequest(l.next, key, limit, n))
	}
	if n == 0 || n > l.batch {
		return l.direct(ctx, le, n)
	}
	// A key has one lease and at most one request (or release) in flight
	// (le.busy). A cost the lease holds is spent from it, and when fewer
	// tokens than its size are left the next lease is asked for in the
	// background, so that decisions do not wait for Redis. A call that
	// finds the lease short while a request is in flight waits for it; if
	// that request was denied for a cost no larger than n, n is denied too
	// (RetryAfter longer by the difference in cost); otherwise, with
	// nothing in flight, the call asks for its own cost and a lease, and
	// gets that decision. So waiters never take leases of their own.
	var waited uint64
	for {
		le.mu.Lock()
		if le.replaced { // released or replaced meanwhile: start over on the current one
			le.mu.Unlock()
			if le, err = l.leaseFor(key, limit); err != nil {
				return sluice.Decision{}, err
			}
			waited = 0
			continue
		}
		now := l.now()
		if le.reserved > 0 && now >= le.deadline && le.busy == nil {
			l.releaseLocked(le) // expired: give back what it holds before asking again
		}
		if le.tokens >= n && now < le.deadline {
			le.tokens -= n
			d := le.estimate(now)
			if le.tokens < le.size && le.busy == nil && le.denial == nil {
				l.refillLater(le)
			}
			le.mu.Unlock()
			return d, nil
		}
		if waited != 0 && le.round == waited {
			// The request this call waited for was denied for a cost no
			// larger than n: n is denied too.
			if dn := le.denial; dn != nil && dn.round == waited && dn.cost <= n {
				d := dn.d
				d.RetryAfter += time.Duration(n-dn.cost) * le.interval
				d.Remaining = min(le.limit.Burst, d.Remaining+le.tokens)
				le.mu.Unlock()
				return d, nil
			}
		}
		if busy := le.busy; busy != nil {
			le.dry = true
			round := le.round + 1
			le.mu.Unlock()
			select {
			case <-busy:
			case <-ctx.Done():
				return sluice.Decision{}, ctx.Err()
			}
			waited = round
			continue
		}
		// Nothing in flight: this call asks for its own cost and a lease.
		done, ok := l.begin(le, false)
		le.mu.Unlock()
		if !ok {
			return sluice.Decision{}, ErrClosed
		}
		return l.take(ctx, le, n, done)
	}
}

// begin marks a request or release of le in flight, unless Close has
// begun (unless force). The caller holds le.mu and le.busy is nil; it
// calls the returned func once the answer is applied, with le.mu not
// held. A lease replaced meanwhile is released then.
func (l *Limiter) begin(le *lease, force bool) (func(), bool) {
	l.opsMu.Lock()
	if l.stopping && !force {
		l.opsMu.Unlock()
		return nil, false
	}
	l.ops.Add(1)
	l.opsMu.Unlock()
	busy := make(chan struct{})
	le.busy = busy
	return func() {
		le.mu.Lock()
		le.busy = nil
		if le.replaced && le.reserved > 0 {
			l.releaseLocked(le)
		}
		le.mu.Unlock()
		close(busy)
		l.ops.Done()
	}, true
}

// take asks the shared limit for cost n and a lease of le.size; the caller
// has begun a request (done ends it). The call waits for its answer
// within ctx; the answer lands in the lease whether it still waits or not.
func (l *Limiter) take(ctx context.Context, le *lease, n int64, done func()) (sluice.Decision, error) {
	le.mu.Lock()
	req := l.request(le, n, le.size)
	le.mu.Unlock()
	return l.await(ctx, le, req, done)
}

// await asks for req and waits for its decision, as take and direct do.
func (l *Limiter) await(ctx context.Context, le *lease, req ext.LeaseRequest, done func()) (sluice.Decision, error) {
	type answer struct {
		d   sluice.Decision
		err error
	}
	answered := make(chan answer, 1)
	l.ask(&pending{le: le, req: req, done: done, then: func(g ext.Grant, err error) {
		if err != nil {
			answered <- answer{err: err}
			return
		}
		d := g.Decision
		d.Limit = le.limit
		d.Remaining = min(le.limit.Burst, d.Remaining+le.tokens)
		if d.Allowed && le.tokens > 0 {
			d.Estimated = true
		}
		answered <- answer{d: d}
	}})
	select {
	case a := <-answered:
		return a.d, a.err
	case <-ctx.Done():
		return sluice.Decision{}, ctx.Err()
	}
}

// pending is a lease request on its way.
type pending struct {
	le   *lease
	req  ext.LeaseRequest
	sent time.Time // before the request left: the store's clock reads later
	// then is called with le.mu held once the answer is applied; done
	// ends the request (le.busy) after that.
	then func(ext.Grant, error)
	done func()
}

// ask sends p: in the next batch of lease requests when the wrapped
// limiter takes them, else alone.
func (l *Limiter) ask(p *pending) {
	if l.sender == nil {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
			defer cancel()
			p.sent = l.clock.Now()
			g, err := l.leaser.Lease(ctx, p.req)
			l.land(p, g, err)
		}()
		return
	}
	l.queueMu.Lock()
	l.queue = append(l.queue, p)
	if l.senders < maxSenders {
		l.senders++
		go l.sendQueued()
	}
	l.queueMu.Unlock()
}

// maxSenders is how many batches of lease requests may be in flight at
// once: one to send while the next forms.
const maxSenders = 2

// sendQueued sends the queued lease requests, up to sluice.MaxBatch in a
// batch, until none is left.
func (l *Limiter) sendQueued() {
	for {
		l.queueMu.Lock()
		if len(l.queue) == 0 {
			l.senders--
			l.queueMu.Unlock()
			return
		}
		// A key goes once in a batch: a later request for it (a new
		// lease's, while the one it replaced still has one queued) waits
		// for the next.
		var batch []*pending
		keys := make(map[string]bool, min(len(l.queue), sluice.MaxBatch))
		left := l.queue[:0]
		for _, p := range l.queue {
			if len(batch) < sluice.MaxBatch && !keys[p.req.Key] {
				keys[p.req.Key] = true
				batch = append(batch, p)
			} else {
				left = append(left, p)
			}
		}
		clear(l.queue[len(left):])
		l.queue = left
		l.queueMu.Unlock()

		reqs := make([]ext.LeaseRequest, len(batch))
		sent := l.clock.Now()
		for i, p := range batch {
			reqs[i], p.sent = p.req, sent
		}
		results := make([]ext.LeaseResult, len(batch))
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		l.sender.Decide(ctx, reqs, results)
		cancel()
		for i, p := range batch {
			l.land(p, results[i].Grant, results[i].Err)
		}
	}
}

// land applies the answer to p and ends it.
func (l *Limiter) land(p *pending, g ext.Grant, err error) {
	le := p.le
	le.mu.Lock()
	if err != nil {
		le.round++
		le.denial = nil // the calls that waited ask themselves, and see their own answer
	} else {
		l.apply(le, p.req, g, p.sent)
	}
	if p.then != nil {
		p.then(g, err)
	}
	le.mu.Unlock()
	p.done()
}

// direct decides a peek or a request larger than B by the shared limit,
// with the process's report.
func (l *Limiter) direct(ctx context.Context, le *lease, n int64) (sluice.Decision, error) {
	le.mu.Lock()
	if now := l.now(); n == 0 && le.tokens > 0 && now < le.deadline {
		d := le.estimate(now)
		le.mu.Unlock()
		return d, nil
	}
	for le.busy != nil {
		busy := le.busy
		le.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return sluice.Decision{}, ctx.Err()
		}
		le.mu.Lock()
	}
	done, ok := l.begin(le, false)
	if !ok {
		le.mu.Unlock()
		return sluice.Decision{}, ErrClosed
	}
	req := l.request(le, n, 0)
	le.mu.Unlock()
	return l.await(ctx, le, req, done)
}

// request is a lease request for le: cost n and extra tokens, with what
// the process holds. The caller holds le.mu.
func (l *Limiter) request(le *lease, n, extra int64) ext.LeaseRequest {
	l.requests.Add(1)
	return ext.LeaseRequest{Key: le.key, Limit: le.limit, Holder: l.holder, Cost: n, Extra: extra, Held: le.tokens, Hold: l.hold}
}

// apply adds a lease's answer to le, sent at sent. The caller holds le.mu.
//
// It also sizes the next lease: B to start with; doubled (up to
// maxBatch) when the process spent a whole lease before the next arrived
// (le.dry), halved when a lease arrives to one still holding a whole size;
// and never more than a quarter of what the shared limit had left, so that
// near the limit one process cannot take what others need. A process
// therefore holds fewer than 2 × maxBatch tokens of a key: what is left of
// one lease (under its size) and the next.
func (l *Limiter) apply(le *lease, req ext.LeaseRequest, g ext.Grant, sent time.Time) {
	le.round++
	if g.Allowed {
		le.tokens += g.Extra
		le.denial = nil
	} else if req.Cost > 0 || req.Extra > 0 {
		le.denial = &denial{round: le.round, cost: max(req.Cost, 1), d: g.Decision}
	}
	// Never hold more than the store reserves: it may reserve less than
	// reported (the reservation expired), and a refund may have added
	// tokens meanwhile.
	le.reserved = g.Reserved
	le.tokens = min(le.tokens, le.reserved)
	if g.Expires > 0 {
		le.deadline = l.since(sent) + int64(g.Expires-l.margin)
	}
	le.remain = g.Remaining
	le.resetAt = l.since(sent) + int64(g.ResetAfter)
	l.schedule(le.due(l.hold))
	switch {
	case g.Allowed && le.dry:
		le.grow = min(le.grow*2, l.maxBatch/l.batch)
	case g.Allowed && le.tokens-g.Extra >= le.size:
		le.grow = max(le.grow/2, 1)
	}
	le.dry = false
	le.size = min(l.batch*le.grow, l.maxBatch, le.capacity, max(1, g.Remaining/4))
}

// estimate is a decision from the lease's tokens. The caller holds le.mu.
func (le *lease) estimate(now int64) sluice.Decision {
	d := sluice.Decision{Allowed: true, Limit: le.limit, Remaining: min(le.limit.Burst, le.tokens+le.remain), Estimated: true,
		Source: sluice.SourceLease}
	if le.resetAt > now {
		d.ResetAfter = time.Duration(le.resetAt - now)
	}
	return d
}

// refillLater asks for le's next lease in the background. The caller
// holds le.mu, and nothing is in flight for le.
func (l *Limiter) refillLater(le *lease) {
	done, ok := l.begin(le, false)
	if !ok {
		return
	}
	l.ask(&pending{le: le, req: l.request(le, 0, le.size), done: done})
}

// releaseLocked gives le's reservation back in the background, with its
// unspent tokens, in a Release call of its own. The caller holds le.mu,
// and nothing is in flight for le.
func (l *Limiter) releaseLocked(le *lease) {
	r := l.beginRelease(le)
	go l.sendReleases([]release{r})
}

// release is a lease's release on its way: le gives back unspent, and
// done ends it (le.busy) once it has landed.
type release struct {
	le      *lease
	unspent int64
	done    func()
}

// beginRelease empties le and marks its release in flight until it lands,
// so that no request overtakes it. The caller holds le.mu, and nothing is
// in flight for le; it sends the release (sendReleases).
func (l *Limiter) beginRelease(le *lease) release {
	unspent := le.tokens
	le.tokens, le.reserved = 0, 0
	l.releases.Add(1)
	done, _ := l.begin(le, true)
	return release{le: le, unspent: unspent, done: done}
}

// sendReleases sends rs, one key each, and ends each once it has landed:
// in batches of up to sluice.MaxBatch when the wrapped limiter takes them
// (l.sender, as refills go), else in a Release call each, one after
// another. A release that fails is not retried: the store's reservation
// ends on its own with its hold.
func (l *Limiter) sendReleases(rs []release) {
	if l.sender == nil || len(rs) == 1 {
		for _, r := range rs {
			ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
			_, _ = l.leaser.Release(ctx, r.le.key, r.le.limit, l.holder, r.unspent)
			cancel()
			r.done()
		}
		return
	}
	for len(rs) > 0 {
		batch := rs[:min(len(rs), sluice.MaxBatch)]
		rs = rs[len(batch):]
		reqs := make([]ext.LeaseRequest, len(batch))
		for i, r := range batch {
			reqs[i] = ext.LeaseRequest{Key: r.le.key, Limit: r.le.limit, Holder: l.holder, Release: true, Unspent: r.unspent}
		}
		results := make([]ext.LeaseResult, len(batch))
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		l.sender.Decide(ctx, reqs, results)
		cancel()
		for _, r := range batch {
			r.done()
		}
	}
}

// leaseFor returns key's lease under limit, creating it, or replacing one
// taken under another limit.
func (l *Limiter) leaseFor(key string, limit sluice.Limit) (*lease, error) {
	if v, ok := l.leases.Load(key); ok {
		if le := v.(*lease); le.limit == limit {
			return le, nil
		}
	}
	if l.closed.Load() {
		return nil, ErrClosed
	}
	// A lease's limit was validated when it was made, so only a new one
	// pays for validation.
	capacity, err := ext.Capacity(l.next, key, limit)
	if err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	fresh := &lease{key: key, limit: limit, capacity: capacity,
		interval: (limit.Period + time.Duration(limit.Rate) - 1) / time.Duration(limit.Rate),
		size:     min(l.batch, capacity), grow: 1}
	for {
		v, loaded := l.leases.LoadOrStore(key, fresh)
		if !loaded {
			return fresh, nil
		}
		old := v.(*lease)
		if old.limit == limit {
			return old, nil
		}
		if l.leases.CompareAndSwap(key, old, fresh) {
			old.mu.Lock()
			old.replaced = true
			if old.busy == nil && old.reserved > 0 {
				l.releaseLocked(old)
			} // else the request in flight releases it when it ends (begin)
			old.mu.Unlock()
			return fresh, nil
		}
	}
}

// Close stops the janitor and releases every lease, giving back its
// unspent tokens (in batches when the wrapped limiter takes them, as the
// janitor's releases go); it waits for the releases. Later calls return
// [ErrClosed]. It is safe to call more than once.
func (l *Limiter) Close() error {
	if !l.closed.CompareAndSwap(false, true) {
		return nil
	}
	l.opsMu.Lock()
	l.stopping = true
	l.opsMu.Unlock()
	l.ops.Wait() // requests in flight land first, so that their tokens are released below
	close(l.stop)
	l.stopped.Wait()
	l.sendReleases(l.sweep(l.now(), true))
	l.ops.Wait()
	return nil
}

// Stats counts what a Limiter asked of the shared limit.
type Stats struct {
	// Requests is the Lease calls made: leases, refills, peeks and
	// requests decided by the shared limit.
	Requests int64
	// Releases is the leases released: each in a Release call of its own,
	// or as a request in a batch (ext.LeaseRequest.Release) when the
	// wrapped limiter takes batches.
	Releases int64
	// Sweeps is the times the janitor woke to release or forget leases:
	// at most once per 100 ms, and never while nothing is leased.
	Sweeps int64
}

// Stats returns what the Limiter asked of the shared limit since New.
func (l *Limiter) Stats() Stats {
	return Stats{Requests: l.requests.Load(), Releases: l.releases.Load(), Sweeps: l.sweeps.Load()}
}

// Held returns the tokens the Limiter holds for key, unspent.
func (l *Limiter) Held(key string) int64 {
	v, ok := l.leases.Load(key)
	if !ok {
		return 0
	}
	le := v.(*lease)
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.tokens
}

// As finds the optional interfaces the wrapped limiter serves but leases
// (see [sluice.As]): the Limiter serves refunds and resets through itself
// when the wrapped limiter does, and always serves batches and Capacity.
func (l *Limiter) As(target any) bool { return ext.Forward(target, l.next, forwarded{l}) }

// forwarded holds the methods of the optional interfaces served only when
// the wrapped limiter serves them.
type forwarded struct{ *Limiter }

// Refund gives n tokens that a request did not use back into key's lease,
// up to what the lease reserves (its tokens spent and not yet reported);
// the rest go to the wrapped limiter's Refund, which does not see
// reservations.
func (l forwarded) Refund(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	if ctx == nil {
		return sluice.Decision{}, sluice.ErrNilContext
	}
	if err := ext.CheckRequest(l.next, key, limit, n); err != nil {
		return sluice.Decision{}, fmt.Errorf("lease: %w", err)
	}
	if n < 1 {
		return sluice.Decision{}, fmt.Errorf("lease: %w: a refund must be at least 1, got %d", sluice.ErrInvalidCost, n)
	}
	if v, ok := l.leases.Load(key); ok {
		le := v.(*lease)
		le.mu.Lock()
		if now := l.now(); le.limit == limit && !le.replaced && now < le.deadline {
			back := min(n, le.reserved-le.tokens)
			le.tokens += back
			n -= back
			d := le.estimate(now)
			le.mu.Unlock()
			if n == 0 {
				return d, nil
			}
		} else {
			le.mu.Unlock()
		}
	}
	inner, err := ext.Require[sluice.Refunder]("lease", l.next)
	if err != nil {
		return sluice.Decision{}, err
	}
	return inner.Refund(ctx, key, limit, n)
}

// Reset forgets key's lease (its tokens are given up and its reservation
// released, before the reset) and resets the wrapped limiter's state of
// key.
func (l forwarded) Reset(ctx context.Context, key string) error {
	if ctx == nil {
		return sluice.ErrNilContext
	}
	inner, err := ext.Require[sluice.Resetter]("lease", l.next)
	if err != nil {
		return err
	}
	if v, ok := l.leases.LoadAndDelete(key); ok {
		le := v.(*lease)
		le.mu.Lock()
		le.replaced = true
		for le.busy != nil { // a request or release in flight lands first
			busy := le.busy
			le.mu.Unlock()
			select {
			case <-busy:
			case <-ctx.Done():
				return ctx.Err()
			}
			le.mu.Lock()
		}
		reserved := le.reserved
		le.tokens, le.reserved = 0, 0
		le.mu.Unlock()
		if reserved > 0 {
			l.releases.Add(1)
			if _, err := l.leaser.Release(ctx, key, le.limit, l.holder, 0); err != nil {
				return fmt.Errorf("lease: reset: %w", err)
			}
		}
	}
	return inner.Reset(ctx, key)
}

// AllowBatch decides each request as AllowN does, in order.
func (l *Limiter) AllowBatch(ctx context.Context, reqs []sluice.Request) ([]sluice.Result, error) {
	if ctx == nil {
		return nil, sluice.ErrNilContext
	}
	if len(reqs) < 1 || len(reqs) > sluice.MaxBatch {
		return nil, fmt.Errorf("lease: a batch holds 1 to %d requests, got %d", sluice.MaxBatch, len(reqs))
	}
	for i, r := range reqs {
		if err := ext.CheckRequest(l.next, r.Key, r.Limit, r.N); err != nil {
			return nil, &sluice.RequestError{Index: i, Err: fmt.Errorf("lease: %w", err)}
		}
	}
	results := make([]sluice.Result, len(reqs))
	for i, r := range reqs {
		results[i].Decision, results[i].Err = l.AllowN(ctx, r.Key, r.Limit, r.N)
	}
	return results, nil
}

// Capacity returns the wrapped limiter's capacity.
func (l *Limiter) Capacity(key string, limit sluice.Limit) (int64, error) {
	return ext.Capacity(l.next, key, limit)
}

var (
	_ sluice.Limiter      = (*Limiter)(nil)
	_ sluice.Refunder     = forwarded{}
	_ sluice.Resetter     = forwarded{}
	_ sluice.BatchLimiter = (*Limiter)(nil)
	_ sluice.Bounded      = (*Limiter)(nil)
)
