package ext_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ext"
)

// timeoutErr is a network timeout, as go-redis reports an expired socket
// deadline ("i/o timeout").
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "read tcp 127.0.0.1:1: i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestCallerDeadline(t *testing.T) {
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel()
	later, cancelLater := context.WithTimeout(context.Background(), time.Hour)
	defer cancelLater()
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"i/o timeout past the caller's deadline", expired, timeoutErr{}, true},
		{"os.ErrDeadlineExceeded past the deadline", expired, os.ErrDeadlineExceeded, true},
		{"a timeout before the caller's deadline", later, timeoutErr{}, false},
		{"a timeout with no deadline", context.Background(), timeoutErr{}, false},
		{"not a timeout", expired, refused, false},
		{"no error", expired, nil, false},
	} {
		got := ext.CallerDeadline(c.ctx, c.err)
		if (got != nil) != c.want || got != nil && !errors.Is(got, context.DeadlineExceeded) {
			t.Errorf("%s: CallerDeadline = %v", c.name, got)
		}
	}
}
