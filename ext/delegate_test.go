package ext_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
)

// plain decides and serves nothing optional.
type plain struct{}

func (plain) AllowN(context.Context, string, sluice.Limit, int64) (sluice.Decision, error) {
	return sluice.Decision{Allowed: true}, nil
}

// resetting serves Resetter on its own type.
type resetting struct{ plain }

func (resetting) Reset(context.Context, string) error { return nil }

// forwarding serves Resetter through its As, as a decorator does.
type forwarding struct{ plain }

func (forwarding) As(target any) bool { return ext.Forward(target, resetting{}, resetting{}) }

// wrapper adds nothing: its As is ext.Delegate.
type wrapper struct{ sluice.Limiter }

func (w wrapper) As(target any) bool { return ext.Delegate(target, w.Limiter) }

// TestDelegate: a wrapper that delegates As serves what it wraps serves,
// found on its type or through its As, and nothing else.
func TestDelegate(t *testing.T) {
	for _, c := range []struct {
		name   string
		inner  sluice.Limiter
		resets bool
	}{
		{"on the type", resetting{}, true},
		{"through As", forwarding{}, true},
		{"not at all", plain{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, ok := sluice.As[sluice.Resetter](wrapper{c.inner})
			require.Equal(t, c.resets, ok)
			if ok {
				require.NoError(t, r.Reset(t.Context(), "k"))
			}
			_, batches := sluice.As[sluice.BatchLimiter](wrapper{c.inner})
			require.False(t, batches)
		})
	}
	var notAnInterface int
	require.False(t, ext.Delegate(&notAnInterface, resetting{}))
	require.False(t, ext.Delegate(nil, resetting{}))
	var r sluice.Resetter
	require.False(t, ext.Delegate(&r, nil))
}
