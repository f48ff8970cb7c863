package sluice

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The optional capabilities of a [Limiter]. Every Sluice algorithm's
// concrete type has the first four, and the token bucket and GCRA lease
// too. A decorator serves each one that the
// limiter it wraps serves (forwarding it, or with its own meaning, which
// its documentation states) and reports which in [Capabler]; ask with
// [Supports] rather than a type assertion, which cannot see through a
// decorator.

// Refunder gives back cost units that a request did not use.
type Refunder interface {
	// Refund gives n (>= 1) cost units back to key under limit, as if a
	// request had not used them, and returns the state after the refund
	// with Allowed true. A key never gains more than its capacity.
	Refund(ctx context.Context, key string, limit Limit, n int64) (Decision, error)
}

// Resetter forgets a key's state, so that its next request sees a fresh
// limit.
type Resetter interface {
	Reset(ctx context.Context, key string) error
}

// Bounded reports what a limiter can enforce, without deciding anything.
type Bounded interface {
	// Capacity returns the largest cost a request on key under limit can
	// ever be allowed (the burst for the bucket algorithms, the rate for
	// the window algorithms, one share's for a sharded key), or the error
	// AllowN would return for limit: an algorithm's own rules included.
	// A request of cost n is valid exactly when limit is and 0 <= n <=
	// Capacity.
	Capacity(key string, limit Limit) (int64, error)
}

// Leaser serves leases: tokens taken from a shared limit by one holder (a
// process's [lease] decorator) to spend without asking again. Unlike
// tokens taken with AllowN, leased tokens still count against the limit
// until the holder reports them spent, releases them, or their hold ends:
// the shared state keeps a reservation per holder, and the limit never
// refills past Burst less what is reserved. So however many holders
// lease, the tokens available at any moment (in the shared state and in
// every lease together) never exceed what the unleased limiter would
// have, and over any interval T they admit at most Burst + Rate x T, as
// the unleased limiter does. Every caller of a leased key must go through
// Lease (the lease decorator does, for every request): a plain AllowN on
// the same key does not see the reservations.
//
// [lease]: https://pkg.go.dev/github.com/sluicehq/sluice/lease
type Leaser interface {
	// Lease decides req.Cost as AllowN would, under the reservations of
	// every other holder, and when it is allowed also grants up to
	// req.Extra more tokens to hold. The holder's reservation becomes
	// req.Held (what it still holds of its earlier grants, never more
	// than its reservation) plus the extra granted, until req.Hold from
	// the store's clock; a denial only lowers it to req.Held.
	Lease(ctx context.Context, req LeaseRequest) (Grant, error)
	// Release ends holder's reservation on key, giving back unspent of
	// its tokens (at most what it reserves; nothing once it has expired).
	// The Decision reports the shared state after the release.
	Release(ctx context.Context, key string, limit Limit, holder int64, unspent int64) (Decision, error)
}

// LeaseRequest is one call to [Leaser.Lease].
type LeaseRequest struct {
	Key   string
	Limit Limit
	// Holder names the reservation: one per key and holder, a positive
	// number the holder picks at random (the lease decorator does).
	Holder int64
	// Cost is decided as AllowN's n is: spent at once when allowed. 0
	// with Extra 0 peeks; 0 with Extra > 0 refills, allowed when the
	// limit has a token left.
	Cost int64
	// Extra is how many tokens to hold beyond Cost, granted as many as
	// the limit has left up to Extra, never more than Burst.
	Extra int64
	// Held is what the holder still holds of its reservation, unspent:
	// the rest of the reservation was spent and stops counting.
	Held int64
	// Hold is how long the reservation lasts from the store's clock: the
	// holder must stop spending its tokens before then. [MinLeaseHold] to
	// [MaxLeaseHold], in whole milliseconds.
	Hold time.Duration
}

// The bounds of a [LeaseRequest]'s Hold.
const (
	MinLeaseHold = time.Millisecond
	MaxLeaseHold = time.Hour
)

// Grant is the answer to a [LeaseRequest].
type Grant struct {
	// Decision is Cost's. Its Remaining is what the shared limit has left
	// for any caller after the grant, reservations excluded.
	Decision
	// Extra is the tokens granted beyond Cost.
	Extra int64
	// Reserved is the holder's reservation now: Held (or less, if the
	// store reserved less, such as after the reservation expired) plus
	// Extra. The holder must never hold more tokens than that.
	Reserved int64
	// Expires is how long from the store's clock the reservation lasts
	// (0 when nothing is reserved): the holder must stop spending before.
	Expires time.Duration
}

// CheckLease validates a lease request for l: its key, limit and Cost as
// [CheckRequest] does, then its own fields. Decorators call it before
// anything that does not reach the store.
func CheckLease(l Limiter, req LeaseRequest) error {
	if err := CheckRequest(l, req.Key, req.Limit, req.Cost); err != nil {
		return err
	}
	return req.CheckLeaseFields()
}

// CheckLeaseFields validates what a lease adds to a request: Holder,
// Extra, Held and Hold.
func (req LeaseRequest) CheckLeaseFields() error {
	switch {
	case req.Holder < 1:
		return fmt.Errorf("%w: a lease holder must be positive, got %d", ErrInvalidCost, req.Holder)
	case req.Extra < 0 || req.Extra > MaxBurst:
		return fmt.Errorf("%w: a lease's extra tokens must be 0 to %d, got %d", ErrInvalidCost, MaxBurst, req.Extra)
	case req.Held < 0 || req.Held > MaxBurst:
		return fmt.Errorf("%w: a lease's held tokens must be 0 to %d, got %d", ErrInvalidCost, MaxBurst, req.Held)
	case req.Hold < MinLeaseHold || req.Hold > MaxLeaseHold || req.Hold%time.Millisecond != 0:
		return fmt.Errorf("%w: a lease's hold must be whole milliseconds from %s to %s, got %s",
			ErrInvalidLimit, MinLeaseHold, MaxLeaseHold, req.Hold)
	}
	return nil
}

// LeaseResult is one request's answer in a batch of lease requests: its
// Grant, or why it got none.
type LeaseResult struct {
	Grant
	Err error
}

// Capability names one optional interface of a [Limiter].
type Capability uint8

// The capabilities, one bit each.
const (
	CanRefund Capability = 1 << iota // [Refunder]
	CanReset                         // [Resetter]
	CanBatch                         // [BatchLimiter]
	CanBound                         // [Bounded]
	CanLease                         // [Leaser]: the token bucket and GCRA

	// AllCapabilities is every capability.
	AllCapabilities = CanRefund | CanReset | CanBatch | CanBound | CanLease
)

// String names the capabilities in c, such as "refund|batch".
func (c Capability) String() string {
	var names []string
	for _, n := range []struct {
		c    Capability
		name string
	}{{CanRefund, "refund"}, {CanReset, "reset"}, {CanBatch, "batch"}, {CanBound, "bound"}, {CanLease, "lease"}} {
		if c&n.c != 0 {
			names = append(names, n.name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "|")
}

// Capabler is implemented by decorators, whose methods for the optional
// interfaces exist whatever they wrap but work only when the wrapped
// limiter serves them: Capabilities reports which do. A method called for
// a capability not reported returns an error wrapping [ErrUnsupported].
type Capabler interface {
	Capabilities() Capability
}

// CapabilitiesOf returns the capabilities l serves: those it reports, if it
// is a [Capabler], else those whose interfaces it implements.
func CapabilitiesOf(l Limiter) Capability {
	if c, ok := l.(Capabler); ok {
		return c.Capabilities()
	}
	var c Capability
	if _, ok := l.(Refunder); ok {
		c |= CanRefund
	}
	if _, ok := l.(Resetter); ok {
		c |= CanReset
	}
	if _, ok := l.(BatchLimiter); ok {
		c |= CanBatch
	}
	if _, ok := l.(Bounded); ok {
		c |= CanBound
	}
	if _, ok := l.(Leaser); ok {
		c |= CanLease
	}
	return c
}

// Supports reports whether l serves every capability in c.
func Supports(l Limiter, c Capability) bool { return CapabilitiesOf(l)&c == c }

// ErrUnsupported is wrapped when a decorator is asked for a capability
// that the limiter it wraps does not serve.
var ErrUnsupported = errors.New("sluice: the wrapped limiter does not support this")

// Unsupported returns the error of a decorator (named by pkg, such as
// "lease") asked for capability c, which next does not serve.
func Unsupported(pkg string, c Capability, next Limiter) error {
	return fmt.Errorf("%s: %w: %T cannot %s", pkg, ErrUnsupported, next, c)
}

// RequireCapabilities is for decorators' constructors: it returns nil if
// next serves need, and otherwise an error naming both layers (the
// decorator pkg and next's type) and what is missing, so that a stack that
// cannot work fails when it is built, not on its first request.
func RequireCapabilities(pkg string, next Limiter, need Capability) error {
	if next == nil {
		return fmt.Errorf("%s: the wrapped limiter must not be nil", pkg)
	}
	if missing := need &^ CapabilitiesOf(next); missing != 0 {
		return fmt.Errorf("%s: %w: %s cannot wrap %T, which cannot %s", pkg, ErrUnsupported, pkg, next, missing)
	}
	return nil
}

// CheckRequest validates a request for l: key, then limit and cost by l's
// [Bounded] capacity when it has one, else by [Limit.Validate] and
// [Limit.ValidateCost]. Decorators call it before anything that does not
// reach the store, so that bad input is an error whatever they decide.
func CheckRequest(l Limiter, key string, limit Limit, n int64) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if b, ok := l.(Bounded); ok && Supports(l, CanBound) {
		capacity, err := b.Capacity(key, limit)
		if err != nil {
			return err
		}
		return limit.validateCostUpTo(n, capacity)
	}
	if err := limit.Validate(); err != nil {
		return err
	}
	return limit.ValidateCost(n)
}
