//go:build unix

package envoyrl

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeGo puts a go first on an otherwise empty PATH that logs its
// arguments and prints what go install prints without a network, and
// returns the log's path.
func fakeGo(t *testing.T) (bin, calls string) {
	t.Helper()
	bin = t.TempDir()
	calls = filepath.Join(t.TempDir(), "go-calls")
	script := "#!/bin/sh\necho \"go $*\" >>" + calls + "\necho 'dial tcp: no network, for the test' >&2\nexit 1\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "go"), []byte(script), 0o755))
	t.Setenv("PATH", bin)
	return bin, calls
}

// TestFindNeverRunsGo: Find takes the binary installed in the cache, else
// service_cmd, else ratelimit on the PATH, and without one says where it
// looked and how to install it; it never runs go.
func TestFindNeverRunsGo(t *testing.T) {
	bin, calls := fakeGo(t)
	cache := t.TempDir()
	_, err := Find(cache)
	require.EqualError(t, err, "it is not installed at "+Path(cache)+", and neither service_cmd nor ratelimit is on the PATH: "+
		"install it with go install github.com/envoyproxy/ratelimit/src/service_cmd@"+Version)
	_, err = Find("")
	require.EqualError(t, err, "neither service_cmd nor ratelimit is on the PATH: install it with go install "+Module+"@"+Version)

	write := func(path string, mode os.FileMode) string {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"), mode))
		return path
	}
	ratelimit := write(filepath.Join(bin, "ratelimit"), 0o755)
	got, err := Find(cache)
	require.NoError(t, err)
	require.Equal(t, ratelimit, got)
	serviceCmd := write(filepath.Join(bin, "service_cmd"), 0o755)
	got, err = Find(cache)
	require.NoError(t, err)
	require.Equal(t, serviceCmd, got)

	write(Path(cache), 0o644)
	got, err = Find(cache)
	require.NoError(t, err)
	require.Equal(t, serviceCmd, got, "a file at the path that cannot run is not installed")
	require.NoError(t, os.Chmod(Path(cache), 0o755))
	got, err = Find(cache)
	require.NoError(t, err)
	require.Equal(t, Path(cache), got)

	ran, _ := os.ReadFile(calls)
	require.Empty(t, string(ran), "Find ran go")
}

// TestInstallSaysWhyAndLeavesNothingBehind: a go install that fails names
// the module and what go printed, and leaves no partial binary; an
// installed binary is reused without running go.
func TestInstallSaysWhyAndLeavesNothingBehind(t *testing.T) {
	_, calls := fakeGo(t)
	cache := t.TempDir()
	_, err := Install(cache, nil)
	require.ErrorContains(t, err, "go install "+Module+"@"+Version)
	require.ErrorContains(t, err, "no network, for the test")
	entries, err := os.ReadDir(filepath.Dir(Path(cache)))
	require.NoError(t, err)
	require.Empty(t, entries, "no partial install left behind")
	_, err = Find(cache)
	require.Error(t, err, "nothing installed")

	require.NoError(t, os.Remove(calls))
	require.NoError(t, os.WriteFile(Path(cache), []byte("#!/bin/sh\n"), 0o755))
	got, err := Install(cache, nil)
	require.NoError(t, err)
	require.Equal(t, Path(cache), got, "an installed binary is reused")
	require.NoFileExists(t, calls, "without running go")
}
