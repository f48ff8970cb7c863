//go:build unix

package envoydiff_test

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	compatOnce sync.Once
	compatOK   bool
)

// ourCompat returns sluice-serve built from this checkout and whether it
// has its compat mode (started with no flags, it serves
// envoyproxy/ratelimit's environment). A sluice-serve without it exits 2
// saying --config is required; until it has it, the cases run on
// envoyproxy/ratelimit alone and hold it to what they expect.
func ourCompat(t *testing.T) (string, bool) {
	t.Helper()
	bin := ourBinary(t)
	compatOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin)
		cmd.Env = cleanEnviron()
		cmd.Dir = buildDir
		out, _ := cmd.CombinedOutput()
		compatOK = !strings.Contains(string(out), "--config is required")
	})
	if !compatOK {
		t.Logf("sluice-serve has no compat mode yet (it asks for --config): envoyproxy/ratelimit runs alone")
	}
	return bin, compatOK
}
