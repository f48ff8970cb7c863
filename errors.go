package sluice

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidLimit is wrapped by every error about a Limit that cannot be
	// enforced (zero, negative or too large fields).
	ErrInvalidLimit = errors.New("sluice: invalid limit")
	// ErrInvalidCost is wrapped by every error about a cost that cannot be
	// decided (negative, or larger than the limit's burst).
	ErrInvalidCost = errors.New("sluice: invalid cost")
	// ErrCostExceedsBurst is wrapped, next to ErrInvalidCost, when a cost is
	// larger than the limit's Burst: such a request can never be allowed.
	ErrCostExceedsBurst = errors.New("sluice: cost exceeds burst")
	// ErrInvalidKey is wrapped by every error about a key that cannot be
	// used (empty).
	ErrInvalidKey = errors.New("sluice: invalid key")
	// ErrKeyConflict is wrapped when the key already holds data that the
	// limiter did not write (another type, or a value it cannot read): a
	// configuration error, such as two applications sharing a key space.
	ErrKeyConflict = errors.New("sluice: key holds data of another kind")
	// ErrUnexpectedReply is wrapped when a store's reply does not have the
	// shape a script promises: a version mismatch or a misconfigured key.
	ErrUnexpectedReply = errors.New("sluice: unexpected reply")
	// ErrCrossSlot is wrapped when the keys of one script call hash to
	// different Redis Cluster slots (the server's CROSSSLOT, or a store
	// that checks before sending). Nothing was run: the call may be
	// retried with its keys split by slot. Keys built with [Key] and one
	// tag share a slot.
	ErrCrossSlot = errors.New("sluice: keys of one call hash to different cluster slots")

	// ErrNilContext is returned by every method that takes a context
	// (decisions, refunds, resets, batches, leases, a store's Run) when
	// it is given a nil one, before anything is sent.
	ErrNilContext = errors.New("sluice: nil context (use context.Background())")
)

// LimitError describes a Limit that cannot be enforced. It wraps
// [ErrInvalidLimit]. Algorithms that refuse a Limit that [Limit.Validate]
// accepts return one with their Reason.
type LimitError struct {
	Limit  Limit
	Reason string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("sluice: invalid limit %s: %s", e.Limit, e.Reason)
}

// Unwrap returns ErrInvalidLimit.
func (e *LimitError) Unwrap() error { return ErrInvalidLimit }

// CostError describes a cost that cannot be decided against a Limit. It
// wraps [ErrInvalidCost], and [ErrCostExceedsBurst] when Exceeds: the cost
// is above the most the limit can ever allow.
type CostError struct {
	Cost    int64
	Limit   Limit
	Reason  string
	Exceeds bool
}

func (e *CostError) Error() string {
	return fmt.Sprintf("sluice: invalid cost %d for limit %s: %s", e.Cost, e.Limit, e.Reason)
}

// Unwrap returns ErrInvalidCost, and ErrCostExceedsBurst where it applies.
func (e *CostError) Unwrap() []error {
	if e.Exceeds {
		return []error{ErrInvalidCost, ErrCostExceedsBurst}
	}
	return []error{ErrInvalidCost}
}
