package sluicetest

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// Tier is one way of running Sluice's scripts, handed to [RunConformance]:
// a store and the means to look at what it stored.
type Tier struct {
	// Name labels the tier in test output ("memstore", "miniredis",
	// "redis/go-redis", ...).
	Name string
	// Store runs the scripts.
	Store sluice.Store
	// Get returns the raw value stored at key, and false if there is none.
	Get func(ctx context.Context, key string) (string, bool, error)
	// TTL returns the time to live of key, and false if there is none.
	TTL func(ctx context.Context, key string) (time.Duration, bool, error)
	// Raw, when not nil, runs a script with arbitrary string arguments
	// (bypassing the Store's []int64), so that the script's own validation
	// of non-numeric input can be tested. Nil on the in-process tier,
	// whose arguments are typed.
	Raw func(ctx context.Context, script *sluice.Script, keys []string, args ...string) ([]int64, error)
}

// Epoch is the fake clock's start in the conformance vectors: a Unix
// microsecond value with 16 significant digits and non-zero trailing
// digits, so that any loss of precision in a script changes a decision.
var Epoch = time.UnixMicro(1_767_225_600_123_457) // 2026-01-01T00:00:00.123457Z

// RunConformance runs every algorithm's conformance vectors against the
// tier built by newTier. Every tier runs the same vectors and must produce
// the same decisions, which are also checked against the in-process model.
func RunConformance(t *testing.T, newTier func(t *testing.T) Tier) {
	t.Run("tokenbucket", func(t *testing.T) { runTokenBucket(t, newTier) })
}
