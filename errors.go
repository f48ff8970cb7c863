package sluice

import (
	"errors"
	"fmt"
	"strings"
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
	// ErrUnexpectedReply is wrapped when a store's reply does not have the
	// shape a script promises: a version mismatch or a misconfigured key.
	ErrUnexpectedReply = errors.New("sluice: unexpected reply")
)

// LimitError describes a Limit that cannot be enforced. It wraps
// [ErrInvalidLimit].
type LimitError struct {
	Limit  Limit
	reason string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("sluice: invalid limit %s: %s", e.Limit, e.reason)
}

// Unwrap returns ErrInvalidLimit.
func (e *LimitError) Unwrap() error { return ErrInvalidLimit }

// CostError describes a cost that cannot be decided against a Limit. It
// wraps [ErrInvalidCost], and [ErrCostExceedsBurst] when Cost > Limit.Burst.
type CostError struct {
	Cost    int64
	Limit   Limit
	reason  string
	exceeds bool
}

func (e *CostError) Error() string {
	return fmt.Sprintf("sluice: invalid cost %d for limit %s: %s", e.Cost, e.Limit, e.reason)
}

// Unwrap returns ErrInvalidCost, and ErrCostExceedsBurst where it applies.
func (e *CostError) Unwrap() []error {
	if e.exceeds {
		return []error{ErrInvalidCost, ErrCostExceedsBurst}
	}
	return []error{ErrInvalidCost}
}

// ValidateKey reports whether key can be used: it must not be empty.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: key must not be empty", ErrInvalidKey)
	}
	return nil
}

// Script error replies. Every Sluice script rejects bad arguments before
// its first write with an error reply that starts with one of these codes,
// so that a caller that bypassed the Go-side checks still gets a typed
// error from [ScriptError].
const (
	scriptErrInvalidLimit = "SLUICE_INVALID_LIMIT"
	scriptErrInvalidCost  = "SLUICE_INVALID_COST"
	scriptErrInvalidKey   = "SLUICE_INVALID_KEY"
	scriptErrInvalidState = "SLUICE_INVALID_STATE"
)

// ScriptError maps an error reply of a Sluice script to the matching
// sentinel error, so errors.Is works on it; other errors are returned as
// they are.
func ScriptError(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, scriptErrInvalidLimit):
		return fmt.Errorf("%w: script rejected arguments: %w", ErrInvalidLimit, err)
	case strings.Contains(msg, scriptErrInvalidCost):
		return fmt.Errorf("%w: script rejected arguments: %w", ErrInvalidCost, err)
	case strings.Contains(msg, scriptErrInvalidState):
		return fmt.Errorf("%w: the key holds data this script did not write: %w", ErrUnexpectedReply, err)
	case strings.Contains(msg, scriptErrInvalidKey):
		return fmt.Errorf("%w: script rejected arguments: %w", ErrInvalidKey, err)
	}
	return err
}
