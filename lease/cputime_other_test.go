//go:build !unix

package lease_test

import (
	"testing"
	"time"
)

// cpuTime is not measured here: the benchmark that needs it skips.
func cpuTime(tb testing.TB) time.Duration {
	tb.Skip("getrusage is unix only")
	return 0
}
