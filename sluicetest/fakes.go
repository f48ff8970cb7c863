package sluicetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
)

// AllowOnly is a [sluice.Limiter] with no optional capability: it has
// AllowN and no other method, for tests of what a decorator does over a
// limiter that serves nothing else. AllowN asks Next, or, when Next is
// nil, allows every request (with the request's limit).
type AllowOnly struct{ Next sluice.Limiter }

// AllowN asks Next, or allows the request when Next is nil.
func (a AllowOnly) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	if a.Next == nil {
		return sluice.Decision{Allowed: true, Limit: limit}, nil
	}
	return a.Next.AllowN(ctx, key, limit, n)
}

// ReleaseCall is one call of [ext.Leaser.Release], as a
// [RecordingLeaser] records it.
type ReleaseCall struct {
	Key             string
	Limit           sluice.Limit
	Holder, Unspent int64
}

// RecordingLeaser is a fake [ext.Leaser] that records every Lease and
// Release it is asked for ([RecordingLeaser.Leases],
// [RecordingLeaser.Releases]) and counts its AllowN calls
// ([RecordingLeaser.Allows]). It answers every Lease with Grant and every
// Release with Freed; with FullLimit, instead, as a limit that is always
// full would: every lease allowed under the request's limit with all its
// Extra, Remaining the limit's Burst less Cost and Extra and Expires its
// Hold; every release allowed with Remaining the Burst. Everything else
// goes to Next (an [AllowOnly] when nil): it serves the capabilities Next
// serves, and leases. After [RecordingLeaser.Fail], AllowN, Lease and
// Release fail (still recorded). It is safe for concurrent use; set its
// fields before the first call.
type RecordingLeaser struct {
	Next      sluice.Limiter
	Grant     ext.Grant
	Freed     sluice.Decision
	FullLimit bool

	mu         sync.Mutex
	err        error // every call's
	releaseErr error // Release's, when err is nil
	allows     int
	leases     []ext.LeaseRequest
	releases   []ReleaseCall
}

func (f *RecordingLeaser) next() sluice.Limiter {
	if f.Next == nil {
		return AllowOnly{}
	}
	return f.Next
}

// Fail makes every later AllowN, Lease and Release fail with err (none
// when err is nil).
func (f *RecordingLeaser) Fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// FailReleases makes every later Release fail with err (none when err is
// nil), after answering it as usual.
func (f *RecordingLeaser) FailReleases(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releaseErr = err
}

// Allows returns how many AllowN calls it was asked.
func (f *RecordingLeaser) Allows() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.allows
}

// Leases returns the lease requests it was asked, in order.
func (f *RecordingLeaser) Leases() []ext.LeaseRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ext.LeaseRequest(nil), f.leases...)
}

// Releases returns the releases it was asked, in order.
func (f *RecordingLeaser) Releases() []ReleaseCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ReleaseCall(nil), f.releases...)
}

// AllowN counts the call and asks Next.
func (f *RecordingLeaser) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	f.mu.Lock()
	f.allows++
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return sluice.Decision{}, err
	}
	return f.next().AllowN(ctx, key, limit, n)
}

// Lease records req and answers it.
func (f *RecordingLeaser) Lease(_ context.Context, req ext.LeaseRequest) (ext.Grant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leases = append(f.leases, req)
	switch {
	case f.err != nil:
		return ext.Grant{}, f.err
	case f.FullLimit:
		return ext.Grant{
			Decision: sluice.Decision{Allowed: true, Limit: req.Limit, Remaining: req.Limit.Burst - req.Cost - req.Extra},
			Extra:    req.Extra,
			Expires:  req.Hold,
		}, nil
	}
	return f.Grant, nil
}

// Release records the release and answers it.
func (f *RecordingLeaser) Release(_ context.Context, key string, limit sluice.Limit, holder, unspent int64) (sluice.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releases = append(f.releases, ReleaseCall{key, limit, holder, unspent})
	switch {
	case f.err != nil:
		return sluice.Decision{}, f.err
	case f.FullLimit:
		return sluice.Decision{Allowed: true, Limit: limit, Remaining: limit.Burst}, nil
	}
	return f.Freed, f.releaseErr
}

// As finds what Next serves (see [sluice.As]): a RecordingLeaser passes
// refunds, resets, batches and Capacity to Next when Next serves them, and
// always leases.
func (f *RecordingLeaser) As(target any) bool {
	return ext.Forward(target, f.next(), recordingForwarded{f})
}

// recordingForwarded holds the methods a RecordingLeaser serves only when
// its Next does.
type recordingForwarded struct{ f *RecordingLeaser }

// Refund passes the refund to Next.
func (r recordingForwarded) Refund(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	next, err := ext.Require[sluice.Refunder]("sluicetest", r.f.next())
	if err != nil {
		return sluice.Decision{}, err
	}
	return next.Refund(ctx, key, limit, n)
}

// Reset passes the reset to Next.
func (r recordingForwarded) Reset(ctx context.Context, key string) error {
	next, err := ext.Require[sluice.Resetter]("sluicetest", r.f.next())
	if err != nil {
		return err
	}
	return next.Reset(ctx, key)
}

// AllowBatch passes the batch to Next.
func (r recordingForwarded) AllowBatch(ctx context.Context, reqs []sluice.Request) ([]sluice.Result, error) {
	next, err := ext.Require[sluice.BatchLimiter]("sluicetest", r.f.next())
	if err != nil {
		return nil, err
	}
	return next.AllowBatch(ctx, reqs)
}

// Capacity asks Next.
func (r recordingForwarded) Capacity(key string, limit sluice.Limit) (int64, error) {
	return ext.Capacity(r.f.next(), key, limit)
}

// RequireLeaseForwarded leases req through l, a decorator over f, and
// releases unspent of it, and requires that both calls reached f unchanged
// (and were its first) and that f's fixed replies, Grant and Freed, came
// back unchanged.
func (f *RecordingLeaser) RequireLeaseForwarded(t testing.TB, l ext.Leaser, req ext.LeaseRequest, unspent int64) {
	t.Helper()
	g, err := l.Lease(t.Context(), req)
	noError(t, err)
	equal(t, f.Grant, g)
	d, err := l.Release(t.Context(), req.Key, req.Limit, req.Holder, unspent)
	noError(t, err)
	equal(t, f.Freed, d)
	equal(t, []ext.LeaseRequest{req}, f.Leases())
	equal(t, []ReleaseCall{{Key: req.Key, Limit: req.Limit, Holder: req.Holder, Unspent: unspent}}, f.Releases())
}

var _ interface {
	sluice.Limiter
	ext.Leaser
} = (*RecordingLeaser)(nil)

// CountingStore is a [sluice.Store] that counts the script calls (Run)
// that reach the Store it wraps, in Runs.
type CountingStore struct {
	sluice.Store
	Runs atomic.Int64
}

// Run counts the call and passes it to the wrapped Store.
func (s *CountingStore) Run(ctx context.Context, script *sluice.Script, keys []string, args []int64) ([]int64, error) {
	s.Runs.Add(1)
	return s.Store.Run(ctx, script, keys, args)
}

// Capabilities returns the names of the optional interfaces l serves, as
// [sluice.As] finds them ("refund", "reset", "batch", "bound", "lease",
// "leasebatch"), after requiring that they are true: a type assertion
// never claims one that As denies, and each one As finds answers a valid
// request without [sluice.ErrUnsupported] (errors of the request itself,
// such as a fake's refusal, are not this check's concern).
func Capabilities(t testing.TB, l sluice.Limiter) []string {
	t.Helper()
	ctx := t.Context()
	limit := sluice.PerSecond(10)
	var served []string
	check := func(name string, asOK, typeOK bool, call func() error) {
		t.Helper()
		isFalse(t, typeOK && !asOK, "%T implements %s, which sluice.As denies", l, name)
		if asOK {
			notErrorIs(t, call(), sluice.ErrUnsupported, "%T serves %s, which sluice.As found", l, name)
			served = append(served, name)
		}
	}
	r, ok := sluice.As[sluice.Refunder](l)
	_, typeOK := l.(sluice.Refunder)
	check("refund", ok, typeOK, func() error { _, err := r.Refund(ctx, "k", limit, 1); return err })
	rs, ok := sluice.As[sluice.Resetter](l)
	_, typeOK = l.(sluice.Resetter)
	check("reset", ok, typeOK, func() error { return rs.Reset(ctx, "k") })
	b, ok := sluice.As[sluice.BatchLimiter](l)
	_, typeOK = l.(sluice.BatchLimiter)
	check("batch", ok, typeOK, func() error {
		_, err := b.AllowBatch(ctx, []sluice.Request{{Key: "k", Limit: limit, N: 1}})
		return err
	})
	bd, ok := sluice.As[sluice.Bounded](l)
	_, typeOK = l.(sluice.Bounded)
	check("bound", ok, typeOK, func() error { _, err := bd.Capacity("k", limit); return err })
	req := ext.LeaseRequest{Key: "k", Limit: limit, Holder: 42, Cost: 1, Extra: 5, Hold: time.Second}
	le, ok := sluice.As[ext.Leaser](l)
	_, typeOK = l.(ext.Leaser)
	check("lease", ok, typeOK, func() error {
		if _, err := le.Lease(ctx, req); err != nil {
			return err
		}
		_, err := le.Release(ctx, "k", limit, 42, 1)
		return err
	})
	lb, ok := sluice.As[ext.LeaseBatcher](l)
	_, typeOK = l.(ext.LeaseBatcher)
	check("leasebatch", ok, typeOK, func() error {
		_, err := lb.LeaseBatch(ctx, []ext.LeaseRequest{req})
		return err
	})
	return served
}

// OwnCapabilities returns the names of the optional interfaces l's own
// type implements, found by a type assertion alone (not through an As
// method), in [Capabilities]' order: what a decorator always serves,
// whatever it wraps.
func OwnCapabilities(l sluice.Limiter) []string {
	var own []string
	for _, c := range []struct {
		name string
		has  bool
	}{
		{"refund", implements[sluice.Refunder](l)},
		{"reset", implements[sluice.Resetter](l)},
		{"batch", implements[sluice.BatchLimiter](l)},
		{"bound", implements[sluice.Bounded](l)},
		{"lease", implements[ext.Leaser](l)},
		{"leasebatch", implements[ext.LeaseBatcher](l)},
	} {
		if c.has {
			own = append(own, c.name)
		}
	}
	return own
}

func implements[T any](l sluice.Limiter) bool {
	_, ok := l.(T)
	return ok
}
