package ext

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// The codes of the error replies Sluice's scripts send. Every script
// rejects bad arguments before its first write with one of them, and each
// algorithm's Go twin returns the same code for the same input.
const (
	CodeInvalidLimit     = "SLUICE_INVALID_LIMIT"
	CodeInvalidCost      = "SLUICE_INVALID_COST"
	CodeCostExceedsBurst = "SLUICE_COST_EXCEEDS_BURST"
	CodeInvalidKey       = "SLUICE_INVALID_KEY"
	CodeInvalidState     = "SLUICE_INVALID_STATE"
)

// ServerError is an error reply from the server, or the same reply from a
// script's Go twin. Code is the reply's first word (Redis's error code:
// WRONGTYPE, CROSSSLOT, NOPERM, OOM, ERR, or one of the Code constants of
// Sluice's scripts); Message is the rest.
//
// Stores return it for every error reply, so that a caller classifies an
// error with errors.As and its Code, never by its text. It wraps the
// sentinel error its code stands for: [sluice.ErrInvalidLimit],
// [sluice.ErrInvalidCost] (and [sluice.ErrCostExceedsBurst]),
// [sluice.ErrInvalidKey], [sluice.ErrKeyConflict] (SLUICE_INVALID_STATE
// and WRONGTYPE) and [sluice.ErrCrossSlot].
type ServerError struct {
	Code    string
	Message string
}

// NewServerError returns the ServerError of an error reply as the server
// sends it, "CODE message": the code is its first word.
func NewServerError(reply string) *ServerError {
	code, message, _ := strings.Cut(reply, " ")
	return &ServerError{Code: code, Message: message}
}

func (e *ServerError) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + " " + e.Message
}

// Unwrap returns the sentinel errors e's code stands for, if any.
func (e *ServerError) Unwrap() []error {
	switch e.Code {
	case CodeInvalidLimit:
		return []error{sluice.ErrInvalidLimit}
	case CodeInvalidCost:
		return []error{sluice.ErrInvalidCost}
	case CodeCostExceedsBurst:
		return []error{sluice.ErrInvalidCost, sluice.ErrCostExceedsBurst}
	case CodeInvalidKey:
		return []error{sluice.ErrInvalidKey}
	case CodeInvalidState, "WRONGTYPE":
		return []error{sluice.ErrKeyConflict}
	case "CROSSSLOT":
		return []error{sluice.ErrCrossSlot}
	}
	return nil
}

// ServerCode returns the code of the ServerError in err's chain, or "".
func ServerCode(err error) string {
	var se *ServerError
	if errors.As(err, &se) {
		return se.Code
	}
	return ""
}

// CallerDeadline reports whether err, a call's failure under ctx, is the
// caller's deadline rather than the store's fault: a timeout (see
// [IsTimeout]) when ctx is done or its deadline has passed. It then returns
// an error wrapping context.DeadlineExceeded (and err's text); else nil.
// The clients enforce a context's deadline on the socket and return "i/o
// timeout" a moment before the context itself says it is done; stores and
// decorators call CallerDeadline so that a caller's short deadline is its
// own error, never counted against the store.
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
