package sluice

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
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

// NewLimitError returns a [LimitError] for l with the given reason, for
// algorithms that refuse a Limit that [Limit.Validate] accepts.
func NewLimitError(l Limit, reason string) error { return &LimitError{Limit: l, reason: reason} }

// NewCostError returns a [CostError] for a cost under l with the given
// reason; exceeds says that the cost is above the most l can ever allow
// (it then also wraps [ErrCostExceedsBurst]).
func NewCostError(cost int64, l Limit, reason string, exceeds bool) error {
	return &CostError{Cost: cost, Limit: l, reason: reason, exceeds: exceeds}
}

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
	scriptErrInvalidLimit     = "SLUICE_INVALID_LIMIT "
	scriptErrInvalidCost      = "SLUICE_INVALID_COST "
	scriptErrCostExceedsBurst = "SLUICE_COST_EXCEEDS_BURST "
	scriptErrInvalidKey       = "SLUICE_INVALID_KEY "
	scriptErrInvalidState     = "SLUICE_INVALID_STATE "
	redisErrWrongType         = "WRONGTYPE "
	redisErrCrossSlot         = "CROSSSLOT "
)

// ScriptError maps an error reply of a Sluice script (and Redis's
// WRONGTYPE) to the matching sentinel error, so errors.Is works on it;
// other errors are returned as they are.
func ScriptError(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case hasCode(msg, scriptErrInvalidLimit):
		return fmt.Errorf("%w: script rejected arguments: %w", ErrInvalidLimit, err)
	case hasCode(msg, scriptErrCostExceedsBurst):
		return fmt.Errorf("%w: %w: script rejected arguments: %w", ErrInvalidCost, ErrCostExceedsBurst, err)
	case hasCode(msg, scriptErrInvalidCost):
		return fmt.Errorf("%w: script rejected arguments: %w", ErrInvalidCost, err)
	case hasCode(msg, scriptErrInvalidKey):
		return fmt.Errorf("%w: script rejected arguments: %w", ErrInvalidKey, err)
	case hasCode(msg, scriptErrInvalidState), hasCode(msg, redisErrWrongType):
		return fmt.Errorf("%w: %w", ErrKeyConflict, err)
	case hasCode(msg, redisErrCrossSlot):
		return fmt.Errorf("%w: %w", ErrCrossSlot, err)
	}
	return err
}

// hasCode reports whether the server's message in msg starts with code:
// msg is either that message or a store's wrapping, "store: message".
func hasCode(msg, code string) bool {
	return strings.HasPrefix(msg, code) || strings.Contains(msg, ": "+code)
}

// CallerDeadline reports whether err, a call's failure under ctx, is the
// caller's deadline rather than the store's fault: a timeout (a network
// timeout, os.ErrDeadlineExceeded, context.DeadlineExceeded) when ctx is
// done or its deadline has passed. It then returns an error wrapping
// context.DeadlineExceeded (and err's text); else nil. The clients enforce
// a context's deadline on the socket and return "i/o timeout" a moment
// before the context itself says it is done, and the stores and the
// fallback decorator use CallerDeadline so that a caller's short deadline
// is its own error, never counted against the store.
func CallerDeadline(ctx context.Context, err error) error {
	if err == nil || ctx == nil || !IsTimeout(err) {
		return nil
	}
	if ctx.Err() == nil {
		deadline, ok := ctx.Deadline()
		if !ok || time.Now().Before(deadline) {
			return nil
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %v", context.DeadlineExceeded, err)
}

// IsTimeout reports whether err is a timeout: a network timeout,
// os.ErrDeadlineExceeded or context.DeadlineExceeded.
func IsTimeout(err error) bool {
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.As(err, &netErr) && netErr.Timeout()
}
