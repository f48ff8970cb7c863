package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAbsPathFlags(t *testing.T) {
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		require.NoError(t, err)
		return a
	}
	got := absPathFlags([]string{"--json", "out.json", "-html=r.html", "--docs", ".", "--duration", "2s", "--from-json=/x/y.json", "--redis", "auto"})
	require.Equal(t, []string{"--json", abs("out.json"), "-html=" + abs("r.html"), "--docs", abs("."), "--duration", "2s", "--from-json=/x/y.json", "--redis", "auto"}, got)
	require.Equal(t, []string{"--json"}, absPathFlags([]string{"--json"}), "a flag without its value is left to the flag parser")
}
