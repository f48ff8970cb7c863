package ext

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
)

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
	// the store's clock; a denial only lowers it to req.Held. A release
	// (req.Release) is for Release or a [LeaseBatcher]: Lease refuses it
	// ([sluice.ErrInvalidCost]).
	Lease(ctx context.Context, req LeaseRequest) (Grant, error)
	// Release ends holder's reservation on key, giving back unspent of
	// its tokens (at most what it reserves; nothing once it has expired).
	// The Decision reports the shared state after the release.
	Release(ctx context.Context, key string, limit sluice.Limit, holder int64, unspent int64) (sluice.Decision, error)
}

// LeaseRequest is one call to [Leaser.Lease], or with Release set, to
// [Leaser.Release] (in a [LeaseBatcher]'s batch).
type LeaseRequest struct {
	Key   string
	Limit sluice.Limit
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
	// Release makes the request a release, as [Leaser.Release]: it ends
	// Holder's reservation on Key under Limit, giving back Unspent of its
	// tokens. Cost, Extra, Held and Hold are then unused, and the answer's
	// Grant is Release's Decision alone (Extra, Reserved and Expires 0).
	Release bool
	// Unspent is the tokens a release gives back, 0 to [sluice.MaxBurst]
	// (the store gives back at most what Holder reserves). Unused unless
	// Release.
	Unspent int64
}

// The bounds of a [LeaseRequest]'s Hold, and of the lease decorator's
// WithHold: a holder stops spending a few milliseconds before its hold
// ends, so a shorter hold would leave it nothing to spend. (The scripts
// themselves accept holds from 1 ms.)
const (
	MinLeaseHold = 10 * time.Millisecond
	MaxLeaseHold = time.Hour
)

// Grant is the answer to a [LeaseRequest].
type Grant struct {
	// Decision is Cost's. Its Remaining is what the shared limit has left
	// for any caller after the grant, reservations excluded.
	sluice.Decision
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

// CheckLease validates a lease request for l: a take's key, limit and
// Cost as [CheckRequest] does, a release's key and limit alone, then the
// request's own fields ([LeaseRequest.CheckLeaseFields]). Decorators call
// it before anything that does not reach the store.
func CheckLease(l sluice.Limiter, req LeaseRequest) error {
	if req.Release {
		if err := ValidateKey(req.Key); err != nil {
			return err
		}
		if _, err := Capacity(l, req.Key, req.Limit); err != nil {
			return err
		}
	} else if err := CheckRequest(l, req.Key, req.Limit, req.Cost); err != nil {
		return err
	}
	return req.CheckLeaseFields()
}

// CheckLeaseFields validates what a lease adds to a request: a take's
// Holder, Extra, Held and Hold; a release's Holder and Unspent, as
// [Leaser.Release] validates them.
func (req LeaseRequest) CheckLeaseFields() error {
	if req.Holder < 1 {
		return fmt.Errorf("%w: a lease holder must be positive, got %d", sluice.ErrInvalidCost, req.Holder)
	}
	if req.Release {
		if req.Unspent < 0 || req.Unspent > sluice.MaxBurst {
			return fmt.Errorf("%w: a release's unspent tokens must be 0 to %d, got %d", sluice.ErrInvalidCost, sluice.MaxBurst, req.Unspent)
		}
		return nil
	}
	switch {
	case req.Extra < 0 || req.Extra > sluice.MaxBurst:
		return fmt.Errorf("%w: a lease's extra tokens must be 0 to %d, got %d", sluice.ErrInvalidCost, sluice.MaxBurst, req.Extra)
	case req.Held < 0 || req.Held > sluice.MaxBurst:
		return fmt.Errorf("%w: a lease's held tokens must be 0 to %d, got %d", sluice.ErrInvalidCost, sluice.MaxBurst, req.Held)
	case req.Hold < MinLeaseHold || req.Hold > MaxLeaseHold || req.Hold%time.Millisecond != 0:
		return fmt.Errorf("%w: a lease's hold must be whole milliseconds from %s to %s, got %s",
			sluice.ErrInvalidLimit, MinLeaseHold, MaxLeaseHold, req.Hold)
	}
	return nil
}

// LeaseResult is one request's answer in a batch of lease requests: its
// Grant, or why it got none. A release's Grant is the Decision
// [Leaser.Release] would return, with Extra, Reserved and Expires 0.
type LeaseResult struct {
	Grant
	Err error
}

// LeaseBatcher runs many lease requests, takes and releases
// ([LeaseRequest.Release]) alike, each on a key of its own, in one call:
// the lease decorator sends its refills and its janitor's releases so when
// the limiter it wraps serves it.
type LeaseBatcher interface {
	LeaseBatch(ctx context.Context, reqs []LeaseRequest) ([]LeaseResult, error)
}
