// Package denycache remembers denials, so that a client hammering a limited
// key costs the store nothing until its RetryAfter has passed.
//
// When the wrapped limiter denies a request of cost n on a key, the
// decorator remembers the key (with its limit and that cost) until the
// denial's RetryAfter, capped at [WithMaxStale]. Until then, a request of
// the same cost on that key and limit is denied locally, with the store's
// RetryAfter counted down (so it stays honest: a retry then is what the
// store said); another cost, a peek, and anything after the entry expires
// go to the wrapped limiter. When the store allows any request on the key,
// its remembered denials are forgotten (they would understate the wait).
// Keys live in a bounded LRU ([WithCapacity]). Leases ([ext.Leaser])
// always go to the wrapped limiter: they are neither answered nor
// remembered here.
//
// # Staleness
//
// A local denial can be wrong only if the key gained room in the store
// meanwhile other than by the passing of time: a Refund, Reset or Release
// made through another process (or another limiter value). This
// decorator's own Refund, Reset and Release (alone or in a LeaseBatch)
// forget the entry. The error is bounded: a local denial
// is never older than min(RetryAfter, MaxStale) (default 1 s). Time alone
// never makes an entry wrong: the store could not have allowed the request
// before RetryAfter anyway.
package denycache

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
)

// Defaults, each overridable with an option.
const (
	// DefaultCapacity is how many keys with denials are remembered at most.
	DefaultCapacity = 10_000
	// DefaultMaxStale caps how long a denial is remembered.
	DefaultMaxStale = time.Second
)

// Limiter remembers the AllowN and AllowBatch denials of the limiter it
// wraps and repeats them locally until they expire; it forwards Refund,
// Reset, Capacity, Lease, Release and LeaseBatch (always to the wrapped
// limiter), and serves every capability the wrapped limiter serves (see
// [sluice.As]). It is safe for
// concurrent use.
type Limiter struct {
	next     sluice.Limiter
	clock    sluice.Clock
	capacity int
	maxStale time.Duration

	mu      sync.Mutex
	entries map[entryKey]*list.Element
	lru     *list.List // front: most recently used; values are *entry
}

var _ sluice.Limiter = (*Limiter)(nil)

type entryKey struct {
	key   string
	limit sluice.Limit
}

// entry is a key's remembered denials, by cost.
type entry struct {
	k       entryKey
	denials map[int64]denial
}

type denial struct {
	at       time.Time       // when the store denied it
	until    time.Time       // when it expires: at + min(RetryAfter, MaxStale)
	decision sluice.Decision // the store's denial
}

// Option configures a [Limiter]. A nil Option is an error, as is an
// option given a bad value.
type Option func(*config) error

type config struct {
	clock    sluice.Clock
	capacity int
	maxStale time.Duration
}

// WithCapacity bounds the number of remembered keys (default
// [DefaultCapacity]); the least recently used is forgotten first.
func WithCapacity(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("denycache: WithCapacity(%d): must be at least 1", n)
		}
		c.capacity = n
		return nil
	}
}

// WithMaxStale caps how long a denial is remembered (default
// [DefaultMaxStale]): the staleness bound under refunds and resets made
// elsewhere.
func WithMaxStale(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("denycache: WithMaxStale(%s): must be positive", d)
		}
		c.maxStale = d
		return nil
	}
}

// WithClock sets the clock (default [sluice.SystemClock]).
func WithClock(c sluice.Clock) Option {
	return func(cfg *config) error {
		if c == nil {
			return errors.New("denycache: WithClock(nil): omit the option to use the system clock")
		}
		cfg.clock = c
		return nil
	}
}

// New returns a Limiter remembering the denials of next. It serves every
// capability next serves.
func New(next sluice.Limiter, opts ...Option) (*Limiter, error) {
	if err := ext.RequireNext("denycache", next); err != nil {
		return nil, err
	}
	c := config{clock: sluice.SystemClock{}, capacity: DefaultCapacity, maxStale: DefaultMaxStale}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("denycache: option %d is nil", i)
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	return &Limiter{next: next, clock: c.clock, capacity: c.capacity, maxStale: c.maxStale,
		entries: map[entryKey]*list.Element{}, lru: list.New()}, nil
}

// AllowN denies locally a request that a remembered denial covers, and
// asks the wrapped limiter otherwise.
func (l *Limiter) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	if ctx == nil {
		return sluice.Decision{}, sluice.ErrNilContext
	}
	k := entryKey{key, limit}
	if n > 0 {
		if d, ok := l.lookup(k, n); ok {
			return d, nil
		}
	}
	d, err := l.next.AllowN(ctx, key, limit, n)
	if err == nil {
		l.record(k, n, d)
	}
	return d, err
}

// record remembers the wrapped limiter's decision d of cost n on k.
func (l *Limiter) record(k entryKey, n int64, d sluice.Decision) {
	switch {
	case n <= 0:
	case !d.Allowed && d.RetryAfter > 0:
		l.remember(k, n, d)
	case d.Allowed:
		// The key just consumed: its remembered denials understate how
		// long to wait now. Forget them.
		l.drop(k)
	}
}

func (l *Limiter) lookup(k entryKey, n int64) (sluice.Decision, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	el, ok := l.entries[k]
	if !ok {
		return sluice.Decision{}, false
	}
	e := el.Value.(*entry)
	dn, ok := e.denials[n]
	if !ok {
		return sluice.Decision{}, false
	}
	now := l.clock.Now()
	if !now.Before(dn.until) {
		delete(e.denials, n)
		if len(e.denials) == 0 {
			l.lru.Remove(el)
			delete(l.entries, k)
		}
		return sluice.Decision{}, false
	}
	l.lru.MoveToFront(el)
	// The store's denial, aged: its RetryAfter and ResetAfter count down.
	elapsed := now.Sub(dn.at)
	d := dn.decision
	d.RetryAfter -= elapsed
	d.ResetAfter = max(d.ResetAfter-elapsed, d.RetryAfter)
	return d, true
}

func (l *Limiter) remember(k entryKey, n int64, d sluice.Decision) {
	now := l.clock.Now()
	dn := denial{at: now, until: now.Add(min(d.RetryAfter, l.maxStale)), decision: d}
	l.mu.Lock()
	defer l.mu.Unlock()
	if el, ok := l.entries[k]; ok {
		el.Value.(*entry).denials[n] = dn
		l.lru.MoveToFront(el)
		return
	}
	l.entries[k] = l.lru.PushFront(&entry{k: k, denials: map[int64]denial{n: dn}})
	for l.lru.Len() > l.capacity {
		oldest := l.lru.Back()
		l.lru.Remove(oldest)
		delete(l.entries, oldest.Value.(*entry).k)
	}
}

// drop forgets k's denials.
func (l *Limiter) drop(k entryKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if el, ok := l.entries[k]; ok {
		l.lru.Remove(el)
		delete(l.entries, k)
	}
}

// forget drops every remembered denial of key.
func (l *Limiter) forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, el := range l.entries {
		if k.key == key {
			l.lru.Remove(el)
			delete(l.entries, k)
		}
	}
}

// As finds the optional interfaces the wrapped limiter serves (see
// [sluice.As]): the Limiter serves them too, through itself.
func (l *Limiter) As(target any) bool { return ext.Forward(target, l.next, forwarded{l}) }

// forwarded holds the methods of the optional interfaces, served only
// when the wrapped limiter serves them.
type forwarded struct{ *Limiter }

// Refund forgets key's denials (the refund makes room they do not know
// of) and passes the refund to the wrapped limiter.
func (l forwarded) Refund(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	if ctx == nil {
		return sluice.Decision{}, sluice.ErrNilContext
	}
	inner, err := ext.Require[sluice.Refunder]("denycache", l.next)
	if err != nil {
		return sluice.Decision{}, err
	}
	l.forget(key)
	return inner.Refund(ctx, key, limit, n)
}

// Reset forgets key's denials and passes the reset to the wrapped limiter.
func (l forwarded) Reset(ctx context.Context, key string) error {
	if ctx == nil {
		return sluice.ErrNilContext
	}
	inner, err := ext.Require[sluice.Resetter]("denycache", l.next)
	if err != nil {
		return err
	}
	l.forget(key)
	return inner.Reset(ctx, key)
}

// AllowBatch decides each request as AllowN would: a request a remembered
// denial covers is denied locally, and the others go to the wrapped
// limiter as one batch, whose denials are remembered in turn.
func (l forwarded) AllowBatch(ctx context.Context, reqs []sluice.Request) ([]sluice.Result, error) {
	if ctx == nil {
		return nil, sluice.ErrNilContext
	}
	inner, err := ext.Require[sluice.BatchLimiter]("denycache", l.next)
	if err != nil {
		return nil, err
	}
	results := make([]sluice.Result, len(reqs))
	var sent []sluice.Request
	var at []int
	for i, r := range reqs {
		if r.N > 0 {
			if d, ok := l.lookup(entryKey{r.Key, r.Limit}, r.N); ok {
				results[i].Decision = d
				continue
			}
		}
		sent = append(sent, r)
		at = append(at, i)
	}
	if len(sent) == 0 {
		return results, nil
	}
	out, err := inner.AllowBatch(ctx, sent)
	if err != nil {
		var reqErr *sluice.RequestError
		if errors.As(err, &reqErr) && reqErr.Index >= 0 && reqErr.Index < len(at) {
			return nil, &sluice.RequestError{Index: at[reqErr.Index], Err: reqErr.Err}
		}
		return nil, err
	}
	if len(out) != len(sent) {
		return nil, fmt.Errorf("denycache: %w: %d results for %d requests", sluice.ErrUnexpectedReply, len(out), len(sent))
	}
	for i, r := range out {
		results[at[i]] = r
		if r.Err == nil {
			l.record(entryKey{sent[i].Key, sent[i].Limit}, sent[i].N, r.Decision)
		}
	}
	return results, nil
}

// Capacity returns the wrapped limiter's capacity: remembering denials
// changes no decision.
func (l forwarded) Capacity(key string, limit sluice.Limit) (int64, error) {
	return ext.Capacity(l.next, key, limit)
}

// Lease always passes the lease request to the wrapped limiter: a lease
// is decided under the reservations of every holder, which a remembered
// denial knows nothing of, so none answers it, and a lease's denials are
// not remembered. A lease that takes tokens forgets the key's remembered
// denials under its limit, as an allowed AllowN does.
func (l forwarded) Lease(ctx context.Context, req ext.LeaseRequest) (ext.Grant, error) {
	if ctx == nil {
		return ext.Grant{}, sluice.ErrNilContext
	}
	inner, err := ext.Require[ext.Leaser]("denycache", l.next)
	if err != nil {
		return ext.Grant{}, err
	}
	g, err := inner.Lease(ctx, req)
	if err == nil && g.Allowed && req.Cost+g.Extra > 0 {
		l.drop(entryKey{req.Key, req.Limit})
	}
	return g, err
}

// LeaseBatch passes many lease requests to the wrapped limiter in one
// call, as Lease passes one: none is answered by a remembered denial, and
// each that takes tokens forgets its key's denials under its limit. A
// release ([ext.LeaseRequest.Release]) forgets its key's denials first,
// as Release does.
func (l forwarded) LeaseBatch(ctx context.Context, reqs []ext.LeaseRequest) ([]ext.LeaseResult, error) {
	if ctx == nil {
		return nil, sluice.ErrNilContext
	}
	inner, err := ext.Require[ext.LeaseBatcher]("denycache", l.next)
	if err != nil {
		return nil, err
	}
	for _, r := range reqs {
		if r.Release {
			l.forget(r.Key)
		}
	}
	out, err := inner.LeaseBatch(ctx, reqs)
	if err != nil {
		return nil, err
	}
	for i, r := range out {
		if i < len(reqs) && !reqs[i].Release && r.Err == nil && r.Allowed && reqs[i].Cost+r.Extra > 0 {
			l.drop(entryKey{reqs[i].Key, reqs[i].Limit})
		}
	}
	return out, nil
}

// Release forgets key's denials (the tokens given back make room they do
// not know of) and passes the release to the wrapped limiter.
func (l forwarded) Release(ctx context.Context, key string, limit sluice.Limit, holder, unspent int64) (sluice.Decision, error) {
	if ctx == nil {
		return sluice.Decision{}, sluice.ErrNilContext
	}
	inner, err := ext.Require[ext.Leaser]("denycache", l.next)
	if err != nil {
		return sluice.Decision{}, err
	}
	l.forget(key)
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

// Stats is what a Limiter holds now.
type Stats struct {
	// Keys is how many keys have remembered denials.
	Keys int
}

// Stats returns what the Limiter holds now.
func (l *Limiter) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Keys: l.lru.Len()}
}
