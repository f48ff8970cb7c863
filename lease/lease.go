// Package lease takes tokens from a shared limiter in batches and spends
// them locally, so that most decisions cost no round trip to Redis.
//
// # How it works
//
// For each key (and limit) a process holds at most one lease: a number of
// tokens taken from the wrapped limiter with one AllowN(key, limit, size)
// and spent by the process's goroutines. When a lease runs low (below half
// its size) the next one is taken in the background, ahead of need, so
// that decisions do not queue behind a round trip. A lease expires after
// its hold time ([WithHold]); what it did not use is refunded to the
// shared limiter, as on [Limiter.Close].
//
// The lease size adapts. It starts at the batch size B ([WithBatch]) and is
// never more than a quarter of what the shared limiter reported left after
// the last lease (at least 1), so as a bucket empties the leases shrink and
// one process cannot take what others need. A lease that the shared limiter
// denies is never partly granted: the request at hand is then decided by
// the shared limiter alone, with its honest RetryAfter.
//
// # Bounds
//
// Leased tokens are taken from the shared limiter before they are spent, so
// the processes together never admit more than the limiter would unleased
// (Burst + Rate × T over any T for a token bucket). They may admit less: at
// most N × B tokens can sit in N processes' leases, unspent; refunds give
// them back when the leases expire. Tokens held by a process that dies are
// lost until the bucket refills. docs/scaling.md has the measured figures.
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
	"time"

	"github.com/sluicehq/sluice"
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

	mu     sync.Mutex
	leases map[leaseKey]*lease
	closed bool

	stop    chan struct{}
	stopped sync.WaitGroup
}

var _ sluice.Limiter = (*Limiter)(nil)

type leaseKey struct {
	key   string
	limit sluice.Limit
}

type lease struct {
	mu       sync.Mutex
	tokens   int64     // left to spend
	expires  time.Time // when the tokens must be refunded
	size     int64     // the next lease's size
	fetching chan struct{}
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

// New returns a Limiter leasing from next. It starts one janitor goroutine
// that refunds expired leases; Close stops it. It does no I/O.
func New(next Refunder, opts ...Option) (*Limiter, error) {
	if next == nil {
		return nil, errors.New("lease: next must not be nil")
	}
	l := &Limiter{next: next, batch: DefaultBatch, hold: DefaultHold, leases: map[leaseKey]*lease{}, stop: make(chan struct{})}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("lease: nil option")
		}
		if err := o.apply(l); err != nil {
			return nil, err
		}
	}
	l.stopped.Go(l.janitor)
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
	if err := limit.Validate(); err != nil {
		return sluice.Decision{}, fmt.Errorf("lease: %w", err)
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
		now := time.Now()
		if !le.expires.After(now) && le.tokens > 0 {
			l.refundLater(key, limit, le.tokens)
			le.tokens = 0
		}
		if le.tokens >= n {
			le.tokens -= n
			d := sluice.Decision{Allowed: true, Limit: limit, Remaining: le.tokens}
			if le.tokens < le.size/2 && le.fetching == nil {
				done := make(chan struct{})
				le.fetching = done
				go l.fetch(key, limit, le, done)
			}
			le.mu.Unlock()
			return d, nil
		}
		fetching := le.fetching
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
	return l.takeLease(ctx, key, limit, le, n)
}

// takeLease takes a lease with n spent from it at once, or, if the shared
// limiter denies the lease, decides n alone.
func (l *Limiter) takeLease(ctx context.Context, key string, limit sluice.Limit, le *lease, n int64) (sluice.Decision, error) {
	le.mu.Lock()
	size := max(le.size, n)
	le.mu.Unlock()
	d, err := l.next.AllowN(ctx, key, limit, size)
	if err != nil {
		return sluice.Decision{}, err
	}
	if !d.Allowed {
		l.shrink(le, d.Remaining)
		if size == n {
			return d, nil
		}
		return l.next.AllowN(ctx, key, limit, n)
	}
	le.mu.Lock()
	le.tokens += size - n
	le.expires = time.Now().Add(l.hold)
	le.size = l.nextSize(d.Remaining)
	d.Remaining = le.tokens
	le.mu.Unlock()
	return d, nil
}

// fetch takes the next lease in the background.
func (l *Limiter) fetch(key string, limit sluice.Limit, le *lease, done chan struct{}) {
	defer func() {
		le.mu.Lock()
		le.fetching = nil
		le.mu.Unlock()
		close(done)
	}()
	le.mu.Lock()
	size := le.size
	le.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), refundTimeout)
	defer cancel()
	d, err := l.next.AllowN(ctx, key, limit, size)
	if err != nil {
		return // the next request takes its lease itself, and sees the error
	}
	if !d.Allowed {
		l.shrink(le, d.Remaining)
		return
	}
	le.mu.Lock()
	le.tokens += size
	le.expires = time.Now().Add(l.hold)
	le.size = l.nextSize(d.Remaining)
	le.mu.Unlock()
}

// nextSize is the next lease's size, given what the shared limiter had
// left after the last: at most a quarter of it, at most B, at least 1.
func (l *Limiter) nextSize(remaining int64) int64 {
	return min(l.batch, max(1, remaining/4))
}

func (l *Limiter) shrink(le *lease, remaining int64) {
	le.mu.Lock()
	le.size = l.nextSize(remaining)
	le.mu.Unlock()
}

func (l *Limiter) leaseFor(key string, limit sluice.Limit) (*lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	k := leaseKey{key, limit}
	le := l.leases[k]
	if le == nil {
		le = &lease{size: min(l.batch, limit.Burst)}
		l.leases[k] = le
	}
	return le, nil
}

func (l *Limiter) refundLater(key string, limit sluice.Limit, n int64) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), refundTimeout)
		defer cancel()
		_, _ = l.next.Refund(ctx, key, limit, n)
	}()
}

// janitor refunds expired leases and forgets idle ones, every half hold.
func (l *Limiter) janitor() {
	t := time.NewTicker(l.hold / 2)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			l.sweep(false)
		}
	}
}

// sweep refunds expired leases (every lease when all is set) and forgets
// empty, expired ones.
func (l *Limiter) sweep(all bool) {
	type refund struct {
		k leaseKey
		n int64
	}
	var refunds []refund
	now := time.Now()
	l.mu.Lock()
	for k, le := range l.leases {
		le.mu.Lock()
		if all || !le.expires.After(now) {
			if le.tokens > 0 {
				refunds = append(refunds, refund{k, le.tokens})
				le.tokens = 0
			}
			if le.fetching == nil {
				delete(l.leases, k)
			}
		}
		le.mu.Unlock()
	}
	l.mu.Unlock()
	for _, r := range refunds {
		ctx, cancel := context.WithTimeout(context.Background(), refundTimeout)
		_, _ = l.next.Refund(ctx, r.k.key, r.k.limit, r.n)
		cancel()
	}
}

// Close stops the janitor and refunds every lease's unspent tokens. Later
// calls return [ErrClosed]. It is safe to call more than once.
func (l *Limiter) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	l.stopped.Wait()
	l.sweep(true)
	return nil
}
