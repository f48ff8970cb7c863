package ext_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/ext"
)

// TestHashSlot checks CRC16 against values CLUSTER KEYSLOT returns.
func TestHashSlot(t *testing.T) {
	require.Equal(t, 12182, ext.HashSlot("foo"))
	require.Equal(t, 11058, ext.HashSlot("somekey"))
	require.Equal(t, 12739, ext.HashSlot("123456789"))
	require.Equal(t, ext.HashSlot("user1000"), ext.HashSlot("{user1000}.following"))
	require.NotEqual(t, ext.HashSlot("{}a"), ext.HashSlot("{}b"), "an empty tag hashes the whole key")
}

func TestHashTag(t *testing.T) {
	for key, want := range map[string]string{
		"rl:{tenant}:x": "tenant", "plain": "", "{}a": "", "a{b}c{d}": "b", "a{": "", "{x}": "x",
	} {
		require.Equal(t, want, ext.HashTag(key), "%q", key)
		if want != "" {
			require.Equal(t, ext.HashSlot(want), ext.HashSlot(key), "%q", key)
		}
	}
}
