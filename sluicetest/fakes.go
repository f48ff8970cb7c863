package sluicetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/forward"
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

// ReleaseCall is one call of [sluice.Leaser.Release], as a
// [RecordingLeaser] records it.
type ReleaseCall struct {
	Key             string
	Limit           sluice.Limit
	Holder, Unspent int64
}

// RecordingLeaser is a fake [sluice.Leaser] that records every Lease and
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
	Grant     sluice.Grant
	Freed     sluice.Decision
	FullLimit bool

	mu         sync.Mutex
	err        error // every call's
	releaseErr error // Release's, when err is nil
	allows     int
	leases     []sluice.LeaseRequest
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
func (f *RecordingLeaser) Leases() []sluice.LeaseRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sluice.LeaseRequest(nil), f.leases...)
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
func (f *RecordingLeaser) Lease(_ context.Context, req sluice.LeaseRequest) (sluice.Grant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leases = append(f.leases, req)
	switch {
	case f.err != nil:
		return sluice.Grant{}, f.err
	case f.FullLimit:
		return sluice.Grant{
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

// Capabilities reports what Next serves, and leases.
func (f *RecordingLeaser) Capabilities() sluice.Capability {
	return sluice.CapabilitiesOf(f.next()) | sluice.CanLease
}

// Refund passes the refund to Next.
func (f *RecordingLeaser) Refund(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	return forward.Refund(ctx, "sluicetest", f.next(), key, limit, n)
}

// Reset passes the reset to Next.
func (f *RecordingLeaser) Reset(ctx context.Context, key string) error {
	return forward.Reset(ctx, "sluicetest", f.next(), key)
}

// AllowBatch passes the batch to Next.
func (f *RecordingLeaser) AllowBatch(ctx context.Context, reqs []sluice.Request) ([]sluice.Result, error) {
	return forward.AllowBatch(ctx, "sluicetest", f.next(), reqs)
}

// Capacity asks Next.
func (f *RecordingLeaser) Capacity(key string, limit sluice.Limit) (int64, error) {
	return forward.Capacity("sluicetest", f.next(), key, limit)
}

// RequireLeaseForwarded leases req through l, a decorator over f, and
// releases unspent of it, and requires that both calls reached f unchanged
// (and were its first) and that f's fixed replies, Grant and Freed, came
// back unchanged.
func (f *RecordingLeaser) RequireLeaseForwarded(t testing.TB, l sluice.Leaser, req sluice.LeaseRequest, unspent int64) {
	t.Helper()
	g, err := l.Lease(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, f.Grant, g)
	d, err := l.Release(t.Context(), req.Key, req.Limit, req.Holder, unspent)
	require.NoError(t, err)
	require.Equal(t, f.Freed, d)
	require.Equal(t, []sluice.LeaseRequest{req}, f.Leases())
	require.Equal(t, []ReleaseCall{{Key: req.Key, Limit: req.Limit, Holder: req.Holder, Unspent: unspent}}, f.Releases())
}

var _ interface {
	Limiter
	sluice.Leaser
	sluice.Capabler
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

// RequireUnsupported calls every optional method that l has (Refund,
// Reset, AllowBatch, Capacity, Lease and Release) for a capability l does
// not report, and requires each to return an error wrapping
// [sluice.ErrUnsupported] that names pkg (the decorator l is), the
// capability (such as "refund") and every string of also (such as the
// wrapped limiter's type). The requests are valid: only the missing
// capability refuses them. A method of a capability l reports is not
// called; test it on its own.
func RequireUnsupported(t testing.TB, l sluice.Limiter, pkg string, also ...string) {
	t.Helper()
	ctx := t.Context()
	caps := sluice.CapabilitiesOf(l)
	limit := sluice.PerSecond(10)
	check := func(method string, c sluice.Capability, err error) {
		t.Helper()
		require.ErrorIs(t, err, sluice.ErrUnsupported, "%T.%s", l, method)
		for _, want := range append([]string{pkg, c.String()}, also...) {
			require.ErrorContains(t, err, want, "%T.%s", l, method)
		}
	}
	if r, ok := l.(sluice.Refunder); ok && caps&sluice.CanRefund == 0 {
		_, err := r.Refund(ctx, "k", limit, 1)
		check("Refund", sluice.CanRefund, err)
	}
	if r, ok := l.(sluice.Resetter); ok && caps&sluice.CanReset == 0 {
		check("Reset", sluice.CanReset, r.Reset(ctx, "k"))
	}
	if b, ok := l.(sluice.BatchLimiter); ok && caps&sluice.CanBatch == 0 {
		_, err := b.AllowBatch(ctx, []sluice.Request{{Key: "k", Limit: limit, N: 1}})
		check("AllowBatch", sluice.CanBatch, err)
	}
	if b, ok := l.(sluice.Bounded); ok && caps&sluice.CanBound == 0 {
		_, err := b.Capacity("k", limit)
		check("Capacity", sluice.CanBound, err)
	}
	if le, ok := l.(sluice.Leaser); ok && caps&sluice.CanLease == 0 {
		_, err := le.Lease(ctx, sluice.LeaseRequest{Key: "k", Limit: limit, Holder: 42, Cost: 1, Extra: 5, Hold: time.Second})
		check("Lease", sluice.CanLease, err)
		_, err = le.Release(ctx, "k", limit, 42, 1)
		check("Release", sluice.CanLease, err)
	}
}
