package harness

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckForDocs: the checkout's sluice-serve (built from the workspace,
// as bench/run.sh builds it) and envoyproxy/ratelimit at envoyrl.Version
// pass; another Go binary in either place (this test's own), or a file
// that is no Go binary, is refused, naming what it is.
func TestCheckForDocs(t *testing.T) {
	bins := requireBinaries(t)
	require.NoError(t, bins.CheckForDocs())

	self, err := os.Executable()
	require.NoError(t, err)
	err = Binaries{SluiceServe: self, EnvoyProxy: bins.EnvoyProxy}.CheckForDocs()
	require.ErrorContains(t, err, "not built from this checkout")
	err = Binaries{SluiceServe: bins.SluiceServe, EnvoyProxy: self}.CheckForDocs()
	require.ErrorContains(t, err, "not github.com/envoyproxy/ratelimit v1.4.1-")
	err = Binaries{SluiceServe: "/dev/null", EnvoyProxy: bins.EnvoyProxy}.CheckForDocs()
	require.ErrorContains(t, err, "sluice-serve /dev/null")
}
