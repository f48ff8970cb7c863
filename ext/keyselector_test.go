package ext_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/ext"
)

func TestKeySelector(t *testing.T) {
	require.True(t, ext.KeySelector{}.Selects("anything"), "the zero value selects every key")

	s, err := ext.SelectKeys([]string{"tenant:42", "a{b}"}, func(key string) bool { return strings.HasPrefix(key, "vip:") })
	require.NoError(t, err)
	for key, want := range map[string]bool{
		sluice.Key("tenant:42", "api"): true, // by its tag
		"tenant:42":                    true, // exactly
		sluice.Key("tenant:43", "api"): false,
		sluice.Key("tenant:4", "2"):    false,
		sluice.Key("a{b}", "x"):        true, // the tag as Key escapes it
		"vip:7":                        true, // by the predicate
		"{}tenant:42":                  false,
	} {
		require.Equal(t, want, s.Selects(key), "%q", key)
	}

	_, err = ext.SelectKeys(nil, nil)
	require.Error(t, err)
	_, err = ext.SelectKeys([]string{"ok", ""}, nil)
	require.ErrorIs(t, err, sluice.ErrInvalidKey)
}
