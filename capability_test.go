package sluice_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
)

// allowOnly is a limiter with no optional capability.
type allowOnly struct{}

func (allowOnly) AllowN(context.Context, string, sluice.Limit, int64) (sluice.Decision, error) {
	return sluice.Decision{Allowed: true}, nil
}

// resetting serves resets itself.
type resetting struct{ allowOnly }

func (resetting) Reset(context.Context, string) error { return nil }

// wrapper finds capabilities as a decorator does: through its As method,
// answering for the interfaces its inner limiter serves.
type wrapper struct{ inner sluice.Limiter }

func (w wrapper) AllowN(ctx context.Context, key string, limit sluice.Limit, n int64) (sluice.Decision, error) {
	return w.inner.AllowN(ctx, key, limit, n)
}

func (w wrapper) As(target any) bool {
	if p, ok := target.(*sluice.Resetter); ok {
		r, ok := sluice.As[sluice.Resetter](w.inner)
		if ok {
			*p = r
		}
		return ok
	}
	return false
}

func TestAsSeesTypesAndDecorators(t *testing.T) {
	_, ok := sluice.As[sluice.Resetter](allowOnly{})
	require.False(t, ok, "a type without the method")
	_, ok = sluice.As[sluice.Resetter](resetting{})
	require.True(t, ok, "a type with the method")
	_, ok = sluice.As[sluice.Resetter](wrapper{wrapper{resetting{}}})
	require.True(t, ok, "through two decorators")
	r, ok := sluice.As[sluice.Resetter](wrapper{allowOnly{}})
	require.False(t, ok, "a decorator over a limiter that cannot")
	require.Nil(t, r)
	_, ok = sluice.As[sluice.Refunder](wrapper{resetting{}})
	require.False(t, ok, "a decorator that does not answer for the interface")
	_, ok = sluice.As[sluice.Resetter](nil)
	require.False(t, ok, "nil")
}
