package ext_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
)

// TestServerErrorUnwrapsToSentinels: the code of an error reply, its first
// word, says which sentinel error it stands for, through any wrapping.
func TestServerErrorUnwrapsToSentinels(t *testing.T) {
	for reply, want := range map[string][]error{
		"SLUICE_INVALID_LIMIT x":                                {sluice.ErrInvalidLimit},
		"SLUICE_INVALID_COST x":                                 {sluice.ErrInvalidCost},
		"SLUICE_INVALID_KEY x":                                  {sluice.ErrInvalidKey},
		"SLUICE_COST_EXCEEDS_BURST x":                           {sluice.ErrInvalidCost, sluice.ErrCostExceedsBurst},
		"SLUICE_INVALID_STATE x":                                {sluice.ErrKeyConflict},
		"WRONGTYPE Operation against a key":                     {sluice.ErrKeyConflict},
		"CROSSSLOT Keys in request don't hash to the same slot": {sluice.ErrCrossSlot},
	} {
		err := fmt.Errorf("store: %w", ext.NewServerError(reply))
		for _, w := range want {
			require.ErrorIs(t, err, w, reply)
		}
		var se *ext.ServerError
		require.ErrorAs(t, err, &se)
		require.Equal(t, reply, se.Error())
	}
	// A code elsewhere in the text (in a key name, say) is not a code.
	other := ext.NewServerError("ERR unknown command 'x SLUICE_INVALID_LIMIT'")
	require.Equal(t, "ERR", other.Code)
	require.Equal(t, "ERR", ext.ServerCode(fmt.Errorf("wrapped: %w", other)))
	require.Empty(t, ext.ServerCode(errors.New("SLUICE_INVALID_LIMIT in plain text is no reply")))
	for _, sentinel := range []error{sluice.ErrInvalidLimit, sluice.ErrInvalidCost, sluice.ErrInvalidKey, sluice.ErrKeyConflict, sluice.ErrCrossSlot} {
		require.NotErrorIs(t, other, sentinel)
	}
	require.Equal(t, &ext.ServerError{Code: "OOM"}, ext.NewServerError("OOM"))
	require.Equal(t, "OOM", ext.NewServerError("OOM").Error())
}

func TestValidateKey(t *testing.T) {
	require.ErrorIs(t, ext.ValidateKey(""), sluice.ErrInvalidKey)
	require.NoError(t, ext.ValidateKey("k"))
}

// TestIsNil: a nil interface and a typed nil inside one are nil; a value
// is not. Decorators and stores refuse both kinds in New.
func TestIsNil(t *testing.T) {
	var typedNil *ext.ServerError
	var asError error = typedNil
	require.True(t, ext.IsNil(nil))
	require.True(t, ext.IsNil(asError))
	require.False(t, ext.IsNil(ext.NewServerError("ERR x")))
	require.False(t, ext.IsNil(42))

	var typedLimiter *nilLimiter
	_, err := ext.Require[sluice.Refunder]("probe", typedLimiter)
	require.ErrorContains(t, err, "probe: the wrapped limiter must not be nil")
	require.ErrorContains(t, ext.RequireNext("probe", typedLimiter), "must not be nil")
}

type nilLimiter struct{}

func (*nilLimiter) AllowN(context.Context, string, sluice.Limit, int64) (sluice.Decision, error) {
	return sluice.Decision{}, nil
}
