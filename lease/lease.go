// Package lease takes tokens from a shared limiter in batches and spends
// them locally, so that most decisions cost no round trip to Redis.
//
// # How it works
//
// For each key (and limit) a process holds at most one lease: a number of
// tokens taken from the wrapped limiter with one AllowN(key, limit, size)
// and spent by the process's goroutines. When a lease runs low (below half
// its size) the next one is taken in the background, ahead of need, so
// that decisions do not queue behind a round trip. A call that finds the
// lease empty while the next one is on its way waits for it once (within
// its context), then, if that was not enough, takes a lease of its own or
// is decided alone: only a key so busy that one lease per round trip does
// not suffice has several on their way. A lease expires after its hold
// time ([WithHold]); what it did not use is refunded to the shared limiter.
//
// When the wrapped limiter takes batches ([sluice.BatchLimiter], as every
// Sluice algorithm does), the background refills of all keys leave
// together: one script call for up to [sluice.MaxBatch] refills, at most
// two such batches on their way, and no timer (a refill goes at once when
// a batch can). A key's first lease joins them too, so that keys needing
// one at the same moment (a process starting under load) share calls. The
// call that needs a lease takes it alone instead when it needs more than
// the next lease's size, or when the last lease asked for was denied or
// failed, so that its answer is its own decision. On a Redis Cluster the
// first batch whose keys span slots is refused before it runs; refills are
// then grouped by hash tag, and a batch's groups are sent at the same time
// (up to 16). A go-redis Ring reports nothing of the kind: give
// [ByHashTag] with one.
//
// [Limiter.Close] waits for the refills on their way, then refunds what
// every lease holds; calls made meanwhile may return [ErrClosed]. A lease a
// call is still taking when Close returns is refunded by that call, less
// what it spends, when it arrives.
//
// The lease size adapts. It starts at the batch size B ([WithBatch]) and is
// never more than a quarter of what the shared limiter reported left after
// the last lease (at least 1), so as a bucket empties the leases shrink and
// one process cannot take what others need. A lease that the shared limiter
// denies is never partly granted. A call that finds no tokens after waiting
// for a lease asks the shared limiter for a lease of its own, or, when
// that is denied too, for its own request alone, and gets that decision
// with its honest RetryAfter.
//
// # Bounds
//
// Leased tokens are taken from the shared limiter before they are spent, so
// the processes together never admit more than the limiter would unleased
// (Burst + Rate × T over any T for a token bucket). They may admit less,
// by what sits unspent in leases: per key and process, up to about 1.5 × B
// (the next lease is taken when half of one is left), more for a moment on
// a key so busy that calls take leases of their own, and little near the
// limit, where leases shrink to a quarter of what the bucket has left.
// Refunds give them back when the leases expire. Tokens held by a process
// that dies are lost until the bucket refills. docs/scaling.md has the
// measured figures (N processes of B = 50 admitted within N × B of the
// unleased bound).
//
// Requests of cost above B, and peeks, go to the shared limiter directly.
// A decision from a lease reports the lease's own Remaining, Source
// [sluice.SourceStore] and no RetryAfter.
package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/batching"
)

// Refunder is the shared limiter lease needs: one that can give unused
// tokens back, as every Sluice algorithm's concrete type can.
type Refunder interface {
	sluice.Limiter
	Refund(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error)
}

// Defaults, each overridable with an option.
const (
	// DefaultBatch is the largest lease, B.
	DefaultBatch = 100
	// DefaultHold is how long a lease may be spent before its remainder
	// is refunded.
	DefaultHold = time.Second
	// refundTimeout bounds a refund made in the background.
	refundTimeout = time.Second
)

// Limiter leases tokens from a shared limiter. It is safe for concurrent
// use; Close it to refund what it holds and stop its janitor.
type Limiter struct {
	next  Refunder
	batch int64
	hold  time.Duration

	leases sync.Map // key string -> *lease; read-mostly, so lock-free reads
	closed atomic.Bool
	mu     sync.Mutex // serialises Close and sweeps

	// nowNanos is a coarse clock (Unix nanoseconds) for lease expiry,
	// moved every clockTick by the janitor: reading it costs far less than
	// time.Now on the hot path, and a lease lives at most clockTick longer.
	nowNanos atomic.Int64
	// fetchCtx bounds background lease fetches: a context with a deadline
	// about refundTimeout away, renewed by the janitor every clockTick, so
	// that a fetch does not pay for a context and timer of its own.
	fetchCtx atomic.Pointer[context.Context]

	// sender sends refills in batches; nil when next cannot take batches,
	// and then each refill goes alone.
	sender *batching.Sender
	byTag  bool // ByHashTag: only keys of one hash tag share a batch

	refillMu  sync.Mutex
	refills   []*lease       // leases waiting for their next lease, oldest first
	refillers int            // goroutines sending refills, at most maxRefillers
	stopping  bool           // Close has begun: no refill starts
	refilling sync.WaitGroup // refills and refunds in the background, which Close waits for

	stop    chan struct{}
	stopped sync.WaitGroup
}

// maxRefillers is how many refill batches may be in flight at once: one
// to send while the next forms.
const maxRefillers = 2

var _ sluice.Limiter = (*Limiter)(nil)

// clockTick is how often the coarse clock moves.
const clockTick = 5 * time.Millisecond

// lease is a key's tokens, taken under one limit. A request under another
// limit for the same key replaces it (refunding what it held).
type lease struct {
	key      string
	limit    sluice.Limit
	mu       sync.Mutex
	tokens   int64 // left to spend
	expires  int64 // Unix nanoseconds: when the tokens must be refunded
	size     int64 // the next lease's size
	fetching chan struct{}
	// takeAlone: the last lease asked for was denied or failed, so the
	// next is taken by the call that needs it, not queued.
	takeAlone bool
	replaced  bool // no longer in the map: spend nothing more from it
}

// Option configures a [Limiter].
type Option interface{ apply(*Limiter) error }

type optionFunc func(*Limiter) error

func (f optionFunc) apply(l *Limiter) error { return f(l) }

// WithBatch sets B, the largest lease (default [DefaultBatch]).
func WithBatch(b int64) Option {
	return optionFunc(func(l *Limiter) error {
		if b < 1 {
			return fmt.Errorf("lease: WithBatch(%d): must be at least 1", b)
		}
		l.batch = b
		return nil
	})
}

// WithHold sets how long a lease may be spent before the rest is refunded
// (default [DefaultHold]). Shorter holds return idle tokens sooner and cost
// more refunds.
func WithHold(d time.Duration) Option {
	return optionFunc(func(l *Limiter) error {
		if d <= 0 {
			return fmt.Errorf("lease: WithHold(%s): must be positive", d)
		}
		l.hold = d
		return nil
	})
}

// ByHashTag makes only keys with the same hash tag share a batch of
// refills, from the start. Give it when next runs on a go-redis Ring,
// which runs a batch on the shard of its first key and reports nothing; a
// Redis Cluster is detected without it (its first cross-slot batch is
// refused before it runs).
func ByHashTag() Option {
	return optionFunc(func(l *Limiter) error {
		l.byTag = true
		return nil
	})
}

// New returns a Limiter leasing from next. It starts one janitor goroutine
// that refunds expired leases; Close stops it. It does no I/O.
func New(next Refunder, opts ...Option) (*Limiter, error) {
	if next == nil {
		return nil, errors.New("lease: next must not be nil")
	}
	l := &Limiter{next: next, batch: DefaultBatch, hold: DefaultHold, stop: make(chan struct{})}
	l.nowNanos.Store(time.Now().UnixNano())
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("lease: nil option")
		}
		if err := o.apply(l); err != nil {
			return nil, err
		}
	}
	if b, ok := next.(batching.Next); ok {
		l.sender = batching.NewSender(b, l.byTag)
	}
	first, cancelFirst := context.WithDeadline(context.Background(), time.Now().Add(refundTimeout))
	l.fetchCtx.Store(&first)
	l.stopped.Go(func() { l.janitor(cancelFirst) })
	return l, nil
}

// ErrClosed is returned by a Limiter after Close.
var ErrClosed = errors.New("lease: limiter closed")

// AllowN decides n against key's limit, from the process's lease when it
// holds enough, else by taking a new lease or asking the shared limiter.
func (l *Limiter) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	if err := sluice.ValidateKey(key); err != nil {
		return sluice.Decision{}, fmt.Errorf("lease: %w", err)
	}
	if l.closed.Load() {
		return sluice.Decision{}, ErrClosed
	}
	if n <= 0 || n > l.batch {
		return l.next.AllowN(ctx, key, limit, n) // peeks, bad costs and large requests
	}
	le, err := l.leaseFor(key, limit)
	if err != nil {
		return sluice.Decision{}, err
	}
	for attempt := 0; ; attempt++ {
		le.mu.Lock()
		if le.replaced { // swept or replaced meanwhile: start over on the current one
			le.mu.Unlock()
			if le, err = l.leaseFor(key, limit); err != nil {
				return sluice.Decision{}, err
			}
			attempt = -1
			continue
		}
		if le.expires <= l.nowNanos.Load() && le.tokens > 0 {
			if !l.refundLater(key, limit, le.tokens) {
				// Close has begun: its sweep refunds them; spend none.
				le.mu.Unlock()
				return sluice.Decision{}, ErrClosed
			}
			le.tokens = 0
		}
		if le.tokens >= n {
			le.tokens -= n
			d := sluice.Decision{Allowed: true, Limit: limit, Remaining: le.tokens}
			if le.tokens < le.size/2 && le.fetching == nil {
				le.fetching = make(chan struct{})
				if !l.refillLater(le) {
					le.fetching = nil
				}
			}
			le.mu.Unlock()
			return d, nil
		}
		fetching := le.fetching
		if fetching == nil && attempt == 0 {
			if l.sender != nil && !le.takeAlone && le.size >= n {
				// Nothing is on its way: the lease joins the refills, so
				// that keys needing one at the same moment (a process
				// starting, new tenants arriving) share script calls, and
				// this call waits for it like any other.
				le.fetching = make(chan struct{})
				if l.refillLater(le) {
					fetching = le.fetching
				} else {
					le.fetching = nil
				}
			}
			if fetching == nil {
				// This call takes the lease itself (the last one asked for
				// was denied or failed, so this call's own answer is
				// likely the answer; or it needs more than a lease), and
				// the calls that meet the lease empty meanwhile wait.
				owned := make(chan struct{})
				le.fetching = owned
				le.mu.Unlock()
				return l.takeLease(ctx, key, limit, le, n, owned)
			}
		}
		le.mu.Unlock()
		if fetching == nil || attempt > 0 {
			break
		}
		// A lease is on its way: wait for it once.
		select {
		case <-fetching:
		case <-ctx.Done():
			return sluice.Decision{}, ctx.Err()
		}
	}
	// Waiting once was not enough (the key is that busy, or the lease was
	// denied): take a lease of this call's own, added to the same tokens,
	// or be decided alone.
	return l.takeLease(ctx, key, limit, le, n, nil)
}

// takeLease takes a lease with n spent from it at once, or, if the shared
// limiter denies the lease, decides n alone. When owned is not nil, it is
// le.fetching, set by the caller: the fetch ends when the lease is known,
// and the calls waiting for it go on.
func (l *Limiter) takeLease(ctx context.Context, key string, limit sluice.Limit, le *lease, n int64, owned chan struct{}) (sluice.Decision, error) {
	endFetch := func() {
		if owned != nil {
			le.mu.Lock()
			le.fetching = nil
			le.mu.Unlock()
			close(owned)
			owned = nil
		}
	}
	defer endFetch()
	le.mu.Lock()
	size := max(le.size, n)
	le.mu.Unlock()
	d, err := l.next.AllowN(ctx, key, limit, size)
	if err != nil {
		le.mu.Lock()
		le.takeAlone = true
		le.mu.Unlock()
		return sluice.Decision{}, err
	}
	if !d.Allowed {
		l.shrink(le, d.Remaining)
		if size == n {
			return d, nil
		}
		endFetch() // the waiters need not wait for this call's own decision
		return l.next.AllowN(ctx, key, limit, n)
	}
	le.mu.Lock()
	if le.replaced {
		le.mu.Unlock()
		// Swept by Close or replaced meanwhile: nothing will spend or
		// refund this lease, so what n did not use goes back now.
		if size > n {
			l.refundNow(ctx, key, limit, size-n)
		}
		d.Remaining = 0
		return d, nil
	}
	le.tokens += size - n
	le.expires = time.Now().Add(l.hold).UnixNano()
	le.size = l.nextSize(d.Remaining)
	le.takeAlone = false
	d.Remaining = le.tokens
	le.mu.Unlock()
	return d, nil
}

// refillLater queues le's next lease, to be taken in the background, and
// reports whether it was queued (not once Close has begun). The caller
// holds le.mu and has set le.fetching.
func (l *Limiter) refillLater(le *lease) bool {
	l.refillMu.Lock()
	defer l.refillMu.Unlock()
	if l.stopping {
		return false
	}
	if l.sender == nil { // next takes no batches: each refill goes alone
		l.refilling.Add(1)
		go func() {
			defer l.refilling.Done()
			l.refill([]*lease{le})
		}()
		return true
	}
	l.refills = append(l.refills, le)
	if l.refillers < maxRefillers {
		l.refillers++
		l.refilling.Add(1)
		go l.sendRefills()
	}
	return true
}

// sendRefills sends the queued refills, up to sluice.MaxBatch in one batch,
// until none is left.
func (l *Limiter) sendRefills() {
	defer l.refilling.Done()
	for {
		l.refillMu.Lock()
		if len(l.refills) == 0 {
			l.refillers--
			l.refillMu.Unlock()
			return
		}
		batch := make([]*lease, min(len(l.refills), sluice.MaxBatch))
		copy(batch, l.refills)
		left := copy(l.refills, l.refills[len(batch):])
		clear(l.refills[left:])
		l.refills = l.refills[:left]
		l.refillMu.Unlock()
		l.refill(batch)
	}
}

// refill takes the next lease of each of leases (one batch when next takes
// batches) and adds it to the tokens left.
func (l *Limiter) refill(leases []*lease) {
	reqs := make([]sluice.Request, len(leases))
	for i, le := range leases {
		le.mu.Lock()
		reqs[i] = sluice.Request{Key: le.key, Limit: le.limit, N: le.size}
		le.mu.Unlock()
	}
	results := make([]sluice.Result, len(leases))
	ctx := *l.fetchCtx.Load()
	if l.sender != nil {
		l.sender.Decide(ctx, reqs, results)
	} else {
		for i, r := range reqs {
			results[i].Decision, results[i].Err = l.next.AllowN(ctx, r.Key, r.Limit, r.N)
		}
	}
	for i, le := range leases {
		l.addLease(le, reqs[i].N, results[i])
	}
}

// addLease adds a refill's answer to le and ends its fetch. A lease
// replaced meanwhile gets nothing: the refill goes back at once (from the
// refill's goroutine, which Close waits for).
func (l *Limiter) addLease(le *lease, size int64, r sluice.Result) {
	le.mu.Lock()
	close(le.fetching)
	le.fetching = nil
	refund := false
	switch {
	case r.Err != nil:
		le.takeAlone = true // the next request takes its lease itself, and sees the error
	case !r.Decision.Allowed:
		le.size = l.nextSize(r.Decision.Remaining)
		le.takeAlone = true
	case le.replaced:
		refund = true
	default:
		le.tokens += size
		le.expires = time.Now().Add(l.hold).UnixNano()
		le.size = l.nextSize(r.Decision.Remaining)
		le.takeAlone = false
	}
	le.mu.Unlock()
	if refund {
		l.refundNow(context.Background(), le.key, le.limit, size)
	}
}

// nextSize is the next lease's size, given what the shared limiter had
// left after the last: at most a quarter of it, at most B, at least 1.
func (l *Limiter) nextSize(remaining int64) int64 {
	return min(l.batch, max(1, remaining/4))
}

// shrink records a denied lease: the next is smaller, and taken by the
// call that needs it.
func (l *Limiter) shrink(le *lease, remaining int64) {
	le.mu.Lock()
	le.size = l.nextSize(remaining)
	le.takeAlone = true
	le.mu.Unlock()
}

// leaseFor returns key's lease under limit, creating it, or replacing one
// taken under another limit.
func (l *Limiter) leaseFor(key string, limit sluice.Limit) (*lease, error) {
	// AllowN checked closed; a lease found here is swept (marked replaced)
	// by Close, so only a new one needs the check again.
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
	if err := limit.Validate(); err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	fresh := &lease{key: key, limit: limit, size: min(l.batch, limit.Burst)}
	for {
		v, loaded := l.leases.LoadOrStore(key, fresh)
		if !loaded {
			return l.admitFresh(key, fresh)
		}
		old := v.(*lease)
		if old.limit == limit {
			return old, nil
		}
		if l.leases.CompareAndSwap(key, old, fresh) {
			old.mu.Lock()
			old.replaced = true
			held := old.tokens
			old.tokens = 0
			old.mu.Unlock()
			if held > 0 && !l.refundLater(old.key, old.limit, held) {
				l.refundNow(context.Background(), old.key, old.limit, held)
			}
			return l.admitFresh(key, fresh)
		}
	}
}

// admitFresh returns a lease just stored under key, unless Close began
// meanwhile: its sweep may have passed key already, so the lease is taken
// out again rather than left where nothing would refund it.
func (l *Limiter) admitFresh(key string, fresh *lease) (*lease, error) {
	if l.closed.Load() {
		fresh.mu.Lock()
		fresh.replaced = true // for any call that found it meanwhile
		fresh.mu.Unlock()
		l.leases.CompareAndDelete(key, fresh)
		return nil, ErrClosed
	}
	return fresh, nil
}

// refundLater gives n tokens back to key in the background, and reports
// whether it will: not once Close has begun, when the caller must keep the
// tokens for Close's sweep or refund them itself.
func (l *Limiter) refundLater(key string, limit sluice.Limit, n int64) bool {
	return l.inBackground(func() { l.refundNow(context.Background(), key, limit, n) })
}

// inBackground runs work in a goroutine that Close waits for, and reports
// whether it does: not once Close has begun.
func (l *Limiter) inBackground(work func()) bool {
	l.refillMu.Lock()
	defer l.refillMu.Unlock()
	if l.stopping {
		return false
	}
	l.refilling.Go(work)
	return true
}

// refundNow gives n tokens back to key, bounded by refundTimeout and not
// by ctx's cancellation (the tokens are owed whatever the caller does).
func (l *Limiter) refundNow(ctx context.Context, key string, limit sluice.Limit, n int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refundTimeout)
	defer cancel()
	_, _ = l.next.Refund(ctx, key, limit, n)
}

// janitor moves the coarse clock and renews the fetch context, and every
// half hold refunds expired leases and forgets idle ones.
func (l *Limiter) janitor(cancelFirst context.CancelFunc) {
	tick := time.NewTicker(clockTick)
	defer tick.Stop()
	// The fetch contexts of the last refundTimeout, oldest first: each is
	// cancelled (its timer released) once a newer one has outlived it.
	cancels := []context.CancelFunc{cancelFirst}
	defer func() {
		for _, cancel := range cancels {
			cancel()
		}
	}()
	renew := func(now time.Time) {
		ctx, cancel := context.WithDeadline(context.Background(), now.Add(refundTimeout))
		l.fetchCtx.Store(&ctx)
		cancels = append(cancels, cancel)
		if keep := int(refundTimeout/clockTick) + 2; len(cancels) > keep {
			cancels[0]()
			cancels = append(cancels[:0], cancels[1:]...)
		}
	}
	lastSweep := time.Now()
	for {
		select {
		case <-l.stop:
			return
		case now := <-tick.C:
			l.nowNanos.Store(now.UnixNano())
			renew(now)
			if now.Sub(lastSweep) >= l.hold/2 {
				l.sweep(false) // its refunds go in the background: the clock keeps moving
				lastSweep = now
			}
		}
	}
}

// sweep refunds expired leases (every lease when all is set) and forgets
// empty, expired ones.
func (l *Limiter) sweep(all bool) {
	type refund struct {
		le *lease
		n  int64
	}
	var refunds []refund
	now := time.Now().UnixNano()
	l.mu.Lock()
	l.leases.Range(func(k, v any) bool {
		le := v.(*lease)
		le.mu.Lock()
		if all || le.expires <= now {
			if le.tokens > 0 {
				refunds = append(refunds, refund{le, le.tokens})
				le.tokens = 0
			}
			// A lease being fetched stays (its fetch would be refunded at
			// once), except on Close: the fetch in flight, a call's own,
			// then sees the lease replaced and refunds what it took.
			if (all || le.fetching == nil) && l.leases.CompareAndDelete(k, le) {
				le.replaced = true
			}
		}
		le.mu.Unlock()
		return true
	})
	l.mu.Unlock()
	if len(refunds) == 0 {
		return
	}
	// Refunds go a few at a time: Close may have thousands to make.
	refundAll := func() {
		slots := make(chan struct{}, sweepRefunds)
		var wg sync.WaitGroup
		for _, r := range refunds {
			slots <- struct{}{}
			wg.Go(func() {
				defer func() { <-slots }()
				l.refundNow(context.Background(), r.le.key, r.le.limit, r.n)
			})
		}
		wg.Wait()
	}
	if all || !l.inBackground(refundAll) {
		refundAll()
	}
}

// sweepRefunds is how many refunds a sweep makes at once.
const sweepRefunds = 16

// Close stops the janitor and refunds every lease's unspent tokens. Later
// calls return [ErrClosed]. It is safe to call more than once.
func (l *Limiter) Close() error {
	if !l.closed.CompareAndSwap(false, true) {
		return nil
	}
	// Refills in flight finish first, under the janitor's fetch context,
	// so that what they took is refunded below rather than lost.
	l.refillMu.Lock()
	l.stopping = true
	l.refillMu.Unlock()
	l.refilling.Wait()
	close(l.stop)
	l.stopped.Wait()
	l.sweep(true)
	return nil
}
