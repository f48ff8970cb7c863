// Package shard spreads a hot key's limit over several sub-keys, each
// holding a share of it, so that one tenant's traffic is not pinned to one
// Redis Cluster shard; together the shares never admit more than the limit.
//
// [New] wraps any [sluice.Limiter] but another shard. [WithShards] sets the
// number of shares S (default [DefaultShards]); [WithHotKeys] or
// [WithPredicate] chooses the keys to shard, by default every key.
// WithHotKeys("tenant:42") shards every key whose hash tag is "tenant:42",
// such as sluice.Key("tenant:42", "api"), and the key "tenant:42"; other
// keys pass through unchanged. See Example and ExampleSubKeys.
//
// A sub-key keeps the key's shape and changes only its hash tag ([SubKey]):
// share 6 of 8 of "rl:{tenant:hot}:api" is "rl:{tenant:hot#6.41}:api".
// Sub-keys of different keys never collide, a key whose hash tag holds no
// '#' is never a sub-key, and on a cluster with slots spread evenly the
// sub-keys land on min(S, primaries) primaries.
//
// A Decision is about the whole limit: Limit is the caller's, Allowed and
// RetryAfter are exact, Remaining and ResetAfter are estimates marked
// [sluice.Decision.Estimated] (exact for a key split into one share). A
// request can be denied while another share still has room. A cost above
// the smallest share's capacity is an error wrapping
// [sluice.ErrCostExceedsBurst], and each share ([Share]) must be a limit
// the algorithm accepts (tokenbucket.ValidateLimit).
//
// A Limiter serves what the limiter it wraps serves (see [sluice.As]), but
// batches of leases, and always serves Capacity:
// Refund goes to the shares that are short, Reset clears the key and its
// sub-keys, and Lease sends each holder to one share ([HolderShare]), so
// under lease.New a process alone gets 1 / S of the limit.
package shard

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
	"github.com/sluicehq/sluice/ext/batching"
)

const pkg = "shard"

// Limiter decorates a [sluice.Limiter], sharding chosen keys. It is safe
// for concurrent use.
type Limiter struct {
	next   sluice.Limiter
	shards int
	hot    ext.KeySelector // the keys to shard

	batch  sluice.BatchLimiter // next, when it batches
	sender *batching.Sender    // next's batches by hash tag, once one met a Cluster
	byTag  atomic.Bool

	subKeys     sync.Map // key -> []string, for up to maxCachedKeys keys
	cachedCount atomic.Int64
}

// maxCachedKeys bounds the sub-key cache; keys beyond it have their
// sub-keys computed on each call (a few CRC16s each).
const maxCachedKeys = 4096

var (
	_ sluice.Limiter      = (*Limiter)(nil)
	_ sluice.Refunder     = forwarded{}
	_ sluice.Resetter     = forwarded{}
	_ sluice.BatchLimiter = forwarded{}
	_ sluice.Bounded      = (*Limiter)(nil)
	_ ext.Leaser          = forwarded{}
)

// DefaultShards is the number of sub-keys when [WithShards] is not given.
const DefaultShards = 4

// MaxShards is the most sub-keys a key can be split into.
const MaxShards = 64

// Option configures a [Limiter].
type Option func(*config) error

type config struct {
	shards int
	chosen bool // WithHotKeys or WithPredicate was given
	keys   []string
	pred   func(string) bool
}

// WithShards sets the number of sub-keys a sharded key is split into, 1 to
// [MaxShards] (default [DefaultShards]).
func WithShards(s int) Option {
	return func(c *config) error {
		if s < 1 || s > MaxShards {
			return fmt.Errorf("shard: WithShards(%d): must be between 1 and %d", s, MaxShards)
		}
		c.shards = s
		return nil
	}
}

// WithHotKeys shards only the keys given (and those of [WithPredicate], if
// also given), each as the caller writes it: a request's key is sharded
// when it equals a given key, or when its hash tag (what Redis Cluster
// hashes: the text between its first '{' and the first '}' after it, when
// not empty) is a given key as [sluice.Key] escapes a tag. So
// WithHotKeys("tenant:42") shards sluice.Key("tenant:42", "api") (that is,
// "rl:{tenant:42}:api"), every other key built with the tag "tenant:42",
// and the key "tenant:42" itself, but not sluice.Key("tenant:43", "api")
// nor sluice.Key("tenant:4", "2"). A given key containing '{', '}' or '%'
// is compared in its escaped form: WithHotKeys("a{b}") matches
// sluice.Key("a{b}", ...), whose tag is "a%7Bb%7D" (':' is not escaped in
// a tag). The default shards every key. At least one key, none empty.
func WithHotKeys(keys ...string) Option {
	return func(c *config) error {
		if len(keys) == 0 {
			return errors.New("shard: WithHotKeys(): give at least one key, or omit the option to shard every key")
		}
		for i, k := range keys {
			if err := ext.ValidateKey(k); err != nil {
				return fmt.Errorf("shard: WithHotKeys(%s): key %d: %w", quoteAll(keys), i, err)
			}
		}
		c.chosen = true
		c.keys = append(c.keys, keys...)
		return nil
	}
}

func quoteAll(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = strconv.Quote(k)
	}
	return strings.Join(q, ", ")
}

// WithPredicate shards the keys for which hot returns true (and those of
// [WithHotKeys], if also given). hot is called with the key as passed to
// AllowN, on every call. The default shards every key.
func WithPredicate(hot func(key string) bool) Option {
	return func(c *config) error {
		if hot == nil {
			return errors.New("shard: WithPredicate(nil): give a predicate, or omit the option to shard every key")
		}
		c.chosen = true
		c.pred = hot
		return nil
	}
}

// New returns a Limiter that shards keys over next. It serves every
// capability next serves, and does no I/O.
func New(next sluice.Limiter, opts ...Option) (*Limiter, error) {
	if err := ext.RequireNext(pkg, next); err != nil {
		return nil, err
	}
	if _, ok := next.(*Limiter); ok {
		return nil, fmt.Errorf("shard: %w: shard cannot wrap *shard.Limiter: its shares would be split again; give one shard WithShards of the product", sluice.ErrUnsupported)
	}
	c := config{shards: DefaultShards}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("shard: option %d is nil", i)
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	l := &Limiter{next: next, shards: c.shards}
	if c.chosen {
		hot, err := ext.SelectKeys(c.keys, c.pred)
		if err != nil {
			return nil, fmt.Errorf("shard: %w", err)
		}
		l.hot = hot
	}
	if b, ok := sluice.As[sluice.BatchLimiter](next); ok {
		l.batch = b
		l.sender = batching.NewSender(next, b, true)
	}
	return l, nil
}

// Sharded reports whether the Limiter shards key.
func (l *Limiter) Sharded(key string) bool { return l.hot.Selects(key) }

// hashTag returns key's hash tag, as Redis Cluster reads it (the text
// between the first '{' and the first '}' after it, when not empty), and
// where it starts and ends in key.
func hashTag(key string) (tag string, start, end int, ok bool) {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return "", 0, 0, false
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return "", 0, 0, false
	}
	return key[i+1 : i+1+j], i + 1, i + 1 + j, true
}

// plan is how a limit is split for a sharded key: S shares, and their
// capacities as the wrapped limiter reports them. The shares take at most
// three values (both Rate and Burst one more, one of them, neither), in
// that order: caps[0] for shares below lo, caps[1] below hi, caps[2] from
// hi on.
type plan struct {
	limit          sluice.Limit
	s, lo, hi      int
	caps           [3]int64
	minCap, sumCap int64
	subKeys        []string
}

// plan splits limit for key, checking it and every share (on its sub-key)
// against next, and finds key's sub-keys.
func (l *Limiter) plan(p *plan, key string, limit sluice.Limit) error {
	if err := ext.ValidateKey(key); err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	if err := limit.Validate(); err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	s := Count(limit, l.shards)
	r, b := int(limit.Rate%int64(s)), int(limit.Burst%int64(s))
	*p = plan{limit: limit, s: s, lo: min(r, b), hi: max(r, b), minCap: -1, subKeys: l.subKeysOf(key, s)}
	for seg, from := range [3]int{0, p.lo, p.hi} {
		to := [3]int{p.lo, p.hi, s}[seg]
		if from >= to {
			continue
		}
		share := Share(limit, s, from)
		c, err := ext.Capacity(l.next, p.subKeys[from], share)
		if err != nil {
			return fmt.Errorf("shard: share %d of %d of %s (%s): %w", from, s, limit, share, err)
		}
		p.caps[seg] = c
		p.sumCap += c * int64(to-from)
		if p.minCap < 0 || c < p.minCap {
			p.minCap = c
		}
	}
	return nil
}

// capOf is share i's capacity.
func (p *plan) capOf(i int) int64 {
	switch {
	case i < p.lo:
		return p.caps[0]
	case i < p.hi:
		return p.caps[1]
	}
	return p.caps[2]
}

// share is share i's limit.
func (p *plan) share(i int) sluice.Limit { return Share(p.limit, p.s, i) }

// checkCost checks 0 <= n <= the smallest share's capacity.
func (p *plan) checkCost(n int64) error {
	switch {
	case n < 0:
		return fmt.Errorf("shard: %w", &sluice.CostError{Cost: n, Limit: p.limit, Reason: "cost must not be negative"})
	case n > p.minCap:
		return fmt.Errorf("shard: %w", &sluice.CostError{Cost: n, Limit: p.limit, Exceeds: true,
			Reason: fmt.Sprintf("cost exceeds %d, the most one of the key's %d shares can ever allow", p.minCap, p.s)})
	}
	return nil
}

// whole turns share i's Decision into one about the whole limit: Limit
// becomes the caller's, and Remaining the share's scaled to the whole
// (times the whole's capacity over the share's, rounded down, never more
// than the whole's capacity: times S for equal shares). ResetAfter stays
// the share's: every share refills at its part of the rate, so a share's
// time to full stands for the whole's. Both are off by how unevenly the
// traffic fell on the shares, hence Estimated (unless there is one share).
// Allowed and RetryAfter need no change.
func (p *plan) whole(d sluice.Decision, i int) sluice.Decision {
	d.Limit = p.limit
	d.Remaining = scale(d.Remaining, p.capOf(i), p.sumCap)
	d.Estimated = d.Estimated || p.s > 1
	return d
}

// scale returns rem × whole / part, rounded down, at most whole.
func scale(rem, part, whole int64) int64 {
	switch {
	case rem <= 0 || part <= 0:
		return 0
	case rem >= part:
		return whole
	}
	hi, lo := bits.Mul64(uint64(rem), uint64(whole))
	q, _ := bits.Div64(hi, lo, uint64(part)) // < whole, since rem < part
	return int64(q)
}

// AllowN decides n against key's limit: directly for a key that is not
// sharded, through one or two of its shares for one that is.
func (l *Limiter) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	if ctx == nil {
		return sluice.Decision{}, sluice.ErrNilContext
	}
	if !l.Sharded(key) {
		return l.next.AllowN(ctx, key, limit, n)
	}
	var p plan
	if err := l.plan(&p, key, limit); err != nil {
		return sluice.Decision{}, err
	}
	if err := p.checkCost(n); err != nil {
		return sluice.Decision{}, err
	}
	// A random share decides; if it denies, one more is tried before the
	// request is denied, so that the shares together behave close to one
	// bucket (a denial while another share has room is rarer). A denial's
	// RetryAfter is the shorter of the two: a retry may go to either.
	first := rand.IntN(p.s)
	d, err := l.next.AllowN(ctx, p.subKeys[first], p.share(first), n)
	if err != nil {
		return sluice.Decision{}, wrap(err)
	}
	if d.Allowed || p.s == 1 {
		return p.whole(d, first), nil
	}
	second := otherShare(first, p.s)
	d2, err := l.next.AllowN(ctx, p.subKeys[second], p.share(second), n)
	if err != nil {
		return sluice.Decision{}, wrap(err)
	}
	if d2.Allowed || d2.RetryAfter <= d.RetryAfter {
		return p.whole(d2, second), nil
	}
	return p.whole(d, first), nil
}

// otherShare picks a share other than first, at random.
func otherShare(first, s int) int { return (first + 1 + rand.IntN(s-1)) % s }

// As finds the optional interfaces the wrapped limiter serves (see
// [sluice.As]): the Limiter serves them too, through itself.
func (l *Limiter) As(target any) bool { return ext.Forward(target, l.next, forwarded{l}) }

// forwarded holds the methods of the optional interfaces, served only
// when the wrapped limiter serves them.
type forwarded struct{ *Limiter }

// Refund gives n cost units back to key. For a sharded key it peeks every
// share, and refunds to the share furthest below its capacity, or, when n
// is more than that share's shortfall, to as many shares as it takes, in
// order of shortfall (any excess goes to shares that were full, up to their
// capacity, in case they were spent from meanwhile). n must be at most the
// whole limit's capacity. The Decision is about the whole limit: its
// Remaining is what the shares have left together, its ResetAfter the
// longest of theirs (see the package documentation). An error after some
// shares were refunded leaves them refunded.
func (l forwarded) Refund(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	if ctx == nil {
		return sluice.Decision{}, sluice.ErrNilContext
	}
	r, err := ext.Require[sluice.Refunder](pkg, l.next)
	if err != nil {
		return sluice.Decision{}, err
	}
	if !l.Sharded(key) {
		return r.Refund(ctx, key, limit, n)
	}
	var p plan
	if err := l.plan(&p, key, limit); err != nil {
		return sluice.Decision{}, err
	}
	switch {
	case n < 1:
		return sluice.Decision{}, fmt.Errorf("shard: %w: a refund must be at least 1, got %d", sluice.ErrInvalidCost, n)
	case n > p.sumCap:
		return sluice.Decision{}, fmt.Errorf("shard: %w", &sluice.CostError{Cost: n, Limit: limit, Exceeds: true,
			Reason: fmt.Sprintf("a refund exceeds %d, the capacity of the key's shares together", p.sumCap)})
	}
	state := make([]sluice.Decision, p.s) // each share's, as peeked, then refunded
	if p.s > 1 {
		if err := each(p.s, func(i int) error {
			d, err := l.next.AllowN(ctx, p.subKeys[i], p.share(i), 0)
			state[i] = d
			return err
		}); err != nil {
			return sluice.Decision{}, fmt.Errorf("shard: refund: peek: %w", err)
		}
	}
	alloc := refundPlan(&p, state, n)
	refunded := make([]bool, p.s)
	if err := each(p.s, func(i int) error {
		if alloc[i] == 0 {
			return nil
		}
		d, err := r.Refund(ctx, p.subKeys[i], p.share(i), alloc[i])
		if err == nil {
			state[i], refunded[i] = d, true
		}
		return err
	}); err != nil {
		return sluice.Decision{}, fmt.Errorf("shard: refund: %w", err)
	}
	out := sluice.Decision{Allowed: true, Limit: limit, Estimated: p.s > 1}
	for i, d := range state {
		out.Remaining += d.Remaining
		out.ResetAfter = max(out.ResetAfter, d.ResetAfter)
		out.Estimated = out.Estimated || d.Estimated
		if refunded[i] && out.Source == sluice.SourceStore {
			out.Source = d.Source
		}
	}
	out.Remaining = min(out.Remaining, p.sumCap)
	return out, nil
}

// refundPlan splits a refund of n over the shares, whose peeked state is
// given: first to fill the largest shortfalls, then, for what is left, up
// to each share's capacity.
func refundPlan(p *plan, state []sluice.Decision, n int64) []int64 {
	alloc := make([]int64, p.s)
	if p.s == 1 {
		alloc[0] = n
		return alloc
	}
	order := make([]int, p.s)
	short := make([]int64, p.s)
	for i := range order {
		order[i] = i
		short[i] = max(0, p.capOf(i)-state[i].Remaining)
	}
	// Stable, largest shortfall first: at most 64 shares.
	for i := 1; i < len(order); i++ {
		for j := i; j > 0 && short[order[j]] > short[order[j-1]]; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	left := n
	for _, i := range order {
		give := min(left, short[i])
		alloc[i] += give
		left -= give
	}
	for _, i := range order {
		give := min(left, p.capOf(i)-alloc[i])
		alloc[i] += give
		left -= give
	}
	return alloc
}

// Reset forgets key's state. For a sharded key, that is the key itself and
// its sub-keys for every share count from 1 to WithShards (the number of
// shares depends on the limit, which Reset is not given): up to S × (S +
// 1) / 2 + 1 keys, reset 16 at a time.
func (l forwarded) Reset(ctx context.Context, key string) error {
	if ctx == nil {
		return sluice.ErrNilContext
	}
	r, err := ext.Require[sluice.Resetter](pkg, l.next)
	if err != nil {
		return err
	}
	if !l.Sharded(key) {
		return r.Reset(ctx, key)
	}
	if err := ext.ValidateKey(key); err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	keys := []string{key}
	seen := map[string]bool{key: true}
	for s := 1; s <= l.shards; s++ {
		for _, k := range SubKeys(key, s) {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	if err := each(len(keys), func(i int) error { return r.Reset(ctx, keys[i]) }); err != nil {
		return fmt.Errorf("shard: reset: %w", err)
	}
	return nil
}

// AllowBatch decides reqs (1 to [sluice.MaxBatch]), each as AllowN would:
// a request for a sharded key goes to one random share, and a denied one to
// a second share in a second batch. Results are in the order of reqs, and a
// [sluice.RequestError] names the request's index in reqs. Every request is
// checked before any is sent. On a Redis Cluster, where sub-keys of one
// key are in different slots, the batch is split by hash tag once the
// store reports [sluice.ErrCrossSlot]; each part is then decided on its own,
// and an error of a part is its requests' Err.
func (l forwarded) AllowBatch(ctx context.Context, reqs []sluice.Request) ([]sluice.Result, error) {
	if ctx == nil {
		return nil, sluice.ErrNilContext
	}
	if len(reqs) == 0 || len(reqs) > sluice.MaxBatch {
		return nil, fmt.Errorf("shard: %w: a batch holds 1 to %d requests, got %d", sluice.ErrInvalidCost, sluice.MaxBatch, len(reqs))
	}
	routed := make([]sluice.Request, len(reqs))
	plans := make([]plan, len(reqs))
	first := make([]int, len(reqs)) // the share tried first; -1 when not sharded
	for i, r := range reqs {
		first[i] = -1
		if !l.Sharded(r.Key) {
			if err := ext.CheckRequest(l.next, r.Key, r.Limit, r.N); err != nil {
				return nil, &sluice.RequestError{Index: i, Err: err}
			}
			routed[i] = r
			continue
		}
		p := &plans[i]
		if err := l.plan(p, r.Key, r.Limit); err != nil {
			return nil, &sluice.RequestError{Index: i, Err: err}
		}
		if err := p.checkCost(r.N); err != nil {
			return nil, &sluice.RequestError{Index: i, Err: err}
		}
		first[i] = rand.IntN(p.s)
		routed[i] = sluice.Request{Key: p.subKeys[first[i]], Limit: p.share(first[i]), N: r.N}
	}
	results, err := l.send(ctx, routed)
	if err != nil {
		var reqErr *sluice.RequestError
		if errors.As(err, &reqErr) && reqErr.Index >= 0 && reqErr.Index < len(reqs) {
			// routed[i] is reqs[i]'s: the index is the caller's.
			return nil, &sluice.RequestError{Index: reqErr.Index, Err: wrap(reqErr.Err)}
		}
		return nil, wrap(err)
	}

	// Denied by their first share: try a second.
	var retry []sluice.Request
	var at, second []int
	for i := range reqs {
		if first[i] < 0 {
			continue
		}
		if results[i].Err != nil {
			results[i].Err = wrap(results[i].Err)
			continue
		}
		p := &plans[i]
		if results[i].Decision.Allowed || p.s == 1 {
			results[i].Decision = p.whole(results[i].Decision, first[i])
			continue
		}
		j := otherShare(first[i], p.s)
		retry = append(retry, sluice.Request{Key: p.subKeys[j], Limit: p.share(j), N: reqs[i].N})
		at, second = append(at, i), append(second, j)
	}
	if len(retry) == 0 {
		return results, nil
	}
	again, err := l.send(ctx, retry)
	for k, i := range at {
		p := &plans[i]
		var d2 sluice.Result
		if err != nil {
			d2.Err = err
		} else {
			d2 = again[k]
		}
		if d2.Err != nil {
			results[i] = sluice.Result{Err: wrap(d2.Err)}
			continue
		}
		d := results[i].Decision
		if d2.Decision.Allowed || d2.Decision.RetryAfter <= d.RetryAfter {
			results[i].Decision = p.whole(d2.Decision, second[k])
		} else {
			results[i].Decision = p.whole(d, first[i])
		}
	}
	return results, nil
}

// send decides reqs with next: in one batch, or, since a batch met a
// Cluster, one per hash tag (a request alone with AllowN).
func (l *Limiter) send(ctx context.Context, reqs []sluice.Request) ([]sluice.Result, error) {
	if !l.byTag.Load() {
		out, err := l.batch.AllowBatch(ctx, reqs)
		switch {
		case err == nil && len(out) != len(reqs):
			return nil, fmt.Errorf("%w: %d results for %d requests", sluice.ErrUnexpectedReply, len(out), len(reqs))
		case err == nil:
			return out, nil
		case !errors.Is(err, sluice.ErrCrossSlot):
			return nil, err
		}
		l.byTag.Store(true)
	}
	out := make([]sluice.Result, len(reqs))
	l.sender.Decide(ctx, reqs, out)
	return out, nil
}

// Capacity returns the largest cost a request on key under limit can ever
// be allowed, or why it cannot be decided (see [sluice.Bounded]): for a
// sharded key the smallest share's capacity as the wrapped limiter reports
// it (and an error if the wrapped limiter refuses any share), for another
// key the wrapped limiter's.
func (l *Limiter) Capacity(key string, limit sluice.Limit) (int64, error) {
	if !l.Sharded(key) {
		return ext.Capacity(l.next, key, limit)
	}
	var p plan
	if err := l.plan(&p, key, limit); err != nil {
		return 0, err
	}
	return p.minCap, nil
}

// Lease passes req to the wrapped limiter. For a sharded key, the holder
// leases from one share ([HolderShare]): req.Key becomes that share's
// sub-key and req.Limit its limit, and the Grant's Decision is about the
// whole limit (see the package documentation). A holder therefore never
// gets more than its share, and is denied when its share is spent, however
// much the others have left. req.Cost must fit the smallest share, as
// AllowN's n must.
func (l forwarded) Lease(ctx context.Context, req ext.LeaseRequest) (ext.Grant, error) {
	if ctx == nil {
		return ext.Grant{}, sluice.ErrNilContext
	}
	le, err := ext.Require[ext.Leaser](pkg, l.next)
	if err != nil {
		return ext.Grant{}, err
	}
	if !l.Sharded(req.Key) {
		return le.Lease(ctx, req)
	}
	var p plan
	if err := l.plan(&p, req.Key, req.Limit); err != nil {
		return ext.Grant{}, err
	}
	if err := p.checkCost(req.Cost); err != nil {
		return ext.Grant{}, err
	}
	i := HolderShare(req.Holder, p.s)
	req.Key, req.Limit = p.subKeys[i], p.share(i)
	g, err := le.Lease(ctx, req)
	if err != nil {
		return ext.Grant{}, wrap(err)
	}
	g.Decision = p.whole(g.Decision, i)
	return g, nil
}

// Release passes a release to the wrapped limiter: for a sharded key, to
// the holder's share, where its Lease went. The Decision is about the
// whole limit.
func (l forwarded) Release(ctx context.Context, key string, limit sluice.Limit, holder, unspent int64) (sluice.Decision, error) {
	if ctx == nil {
		return sluice.Decision{}, sluice.ErrNilContext
	}
	le, err := ext.Require[ext.Leaser](pkg, l.next)
	if err != nil {
		return sluice.Decision{}, err
	}
	if !l.Sharded(key) {
		return le.Release(ctx, key, limit, holder, unspent)
	}
	var p plan
	if err := l.plan(&p, key, limit); err != nil {
		return sluice.Decision{}, err
	}
	i := HolderShare(holder, p.s)
	d, err := le.Release(ctx, p.subKeys[i], p.share(i), holder, unspent)
	if err != nil {
		return sluice.Decision{}, wrap(err)
	}
	return p.whole(d, i), nil
}

// HolderShare is the share, of s, that a lease holder leases from: a hash
// of holder modulo s, the same in every process.
func HolderShare(holder int64, s int) int {
	x := uint64(holder) // splitmix64's finalizer
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return int(x % uint64(s))
}

// maxConcurrent bounds the calls of one Refund or Reset in flight at once.
const maxConcurrent = 16

// each runs f(0) to f(n-1), up to maxConcurrent at once, and returns the
// first error, counting the others.
func each(n int, f func(i int) error) error {
	if n == 1 {
		return f(0)
	}
	errs := make([]error, n)
	slots := make(chan struct{}, maxConcurrent)
	var wg sync.WaitGroup
	for i := range n {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			errs[i] = f(i)
		})
	}
	wg.Wait()
	var first error
	failed := 0
	for _, err := range errs {
		if err != nil {
			if first == nil {
				first = err
			}
			failed++
		}
	}
	if failed > 1 {
		return fmt.Errorf("%w (and %d more errors)", first, failed-1)
	}
	return first
}

// subKeysOf returns key's s sub-keys, from the cache when it can.
func (l *Limiter) subKeysOf(key string, s int) []string {
	if v, ok := l.subKeys.Load(key); ok {
		if keys := v.([]string); len(keys) == s {
			return keys
		}
	}
	keys := SubKeys(key, s)
	if l.cachedCount.Load() < maxCachedKeys {
		if _, loaded := l.subKeys.Swap(key, keys); !loaded {
			l.cachedCount.Add(1)
		}
	}
	return keys
}

// SubKeys returns the s sub-keys of key (see [SubKey]).
func SubKeys(key string, s int) []string {
	keys := make([]string, s)
	for i := range keys {
		keys[i] = SubKey(key, i, s)
	}
	return keys
}

func wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("shard: %w", err)
}

// Count is the number of shares limit is split into for a wish of s: at
// most s, and at most Rate and Burst, so that every share is a valid limit.
func Count(limit sluice.Limit, s int) int {
	return int(max(1, min(int64(s), limit.Rate, limit.Burst)))
}

// Share returns share i of limit split s ways: Rate / s and Burst / s, the
// first Rate % s (and Burst % s) shares one more, so the shares add up to
// limit exactly. s must be at most limit.Rate and limit.Burst (see Count).
func Share(limit sluice.Limit, s, i int) sluice.Limit {
	split := func(v int64) int64 {
		share := v / int64(s)
		if int64(i) < v%int64(s) {
			share++
		}
		return share
	}
	return sluice.Limit{Rate: split(limit.Rate), Period: limit.Period, Burst: split(limit.Burst)}
}

// SubKey returns the key of share i of s for key. It is key with its hash
// tag T replaced by T#i.salt: share 6 of 8 of "rl:{tenant:hot}:api" is
// "rl:{tenant:hot#6.41}:api". A key without a hash tag K becomes
// {#K#i.salt}: "tenant:42" becomes "{#tenant:42#6.53}" (the leading '#'
// tells it from a sub-key of the key "{tenant:42}"). In T and K, '%', '#',
// '{' and '}' are escaped as %25, %23, %7B and %7D, so the sub-key's tag
// holds the key's text, then one '#' (two for a key without a tag) before
// the share's number: sub-keys of different keys, or of different shares,
// never collide, and no key whose hash tag holds no '#' (such as
// [sluice.Key] builds from a tag without '#') is anyone's sub-key. The salt
// is the smallest that puts the sub-key's Redis Cluster slot in the middle
// quarter of the i-th of s equal parts of the slot range (so that, with
// primaries owning equal ranges, S shares reach min(S, primaries) of them).
func SubKey(key string, i, s int) string {
	width := 16384 / s
	center := i*width + width/2
	lo, hi := center-width/8, center+width/8+1
	tag, start, end, tagged := hashTag(key)
	var base string
	if tagged {
		base = escapeTag(tag) + "#" + strconv.Itoa(i) + "."
	} else {
		base = "#" + escapeTag(key) + "#" + strconv.Itoa(i) + "."
	}
	for salt := 0; ; salt++ {
		newTag := base + strconv.Itoa(salt)
		// CRC16 spreads evenly, so about 4 × s tries are expected (they
		// are cached); the bound only guards against a degenerate input.
		if slot := ext.HashSlot("{" + newTag + "}"); slot >= lo && slot < hi || salt >= 1<<16 {
			if tagged {
				return key[:start] + newTag + key[end:]
			}
			return "{" + newTag + "}"
		}
	}
}

// tagEscaper escapes what would end or reopen a hash tag, '#', which
// separates the share's number, and '%', the escape.
var tagEscaper = strings.NewReplacer("%", "%25", "#", "%23", "{", "%7B", "}", "%7D")

func escapeTag(s string) string {
	if !strings.ContainsAny(s, "%#{}") {
		return s
	}
	return tagEscaper.Replace(s)
}
