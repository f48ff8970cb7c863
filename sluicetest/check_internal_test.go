package sluicetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// recorder is a testing.TB whose Fatalf records instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper()                        {}
func (r *recorder) Fatalf(format string, a ...any) { r.failed = fmt.Sprintf(format, a...) }

// TestTheKitsChecksFail: every assertion of the kit fails when it should,
// with its message, and passes when it should.
func TestTheKitsChecksFail(t *testing.T) {
	sentinel := errors.New("sentinel")
	for _, c := range []struct {
		name       string
		pass, fail func(tb testing.TB)
	}{
		{"noError", func(tb testing.TB) { noError(tb, nil) }, func(tb testing.TB) { noError(tb, sentinel, "step %d", 3) }},
		{"isError", func(tb testing.TB) { isError(tb, sentinel) }, func(tb testing.TB) { isError(tb, nil, "step %d", 3) }},
		{"errorIs", func(tb testing.TB) { errorIs(tb, fmt.Errorf("w: %w", sentinel), sentinel) }, func(tb testing.TB) { errorIs(tb, errors.New("x"), sentinel, "step %d", 3) }},
		{"notErrorIs", func(tb testing.TB) { notErrorIs(tb, errors.New("x"), sentinel) }, func(tb testing.TB) { notErrorIs(tb, sentinel, sentinel, "step %d", 3) }},
		{"equal", func(tb testing.TB) { equal(tb, []int{1}, []int{1}) }, func(tb testing.TB) { equal(tb, 1, int64(1), "step %d", 3) }},
		{"isTrue", func(tb testing.TB) { isTrue(tb, true) }, func(tb testing.TB) { isTrue(tb, false, "step %d", 3) }},
		{"isFalse", func(tb testing.TB) { isFalse(tb, false) }, func(tb testing.TB) { isFalse(tb, true, "step %d", 3) }},
		{"greater", func(tb testing.TB) { greater(tb, 2, 1) }, func(tb testing.TB) { greater(tb, 1, 1, "step %d", 3) }},
		{"lessOrEqual", func(tb testing.TB) { lessOrEqual(tb, 1, 1) }, func(tb testing.TB) { lessOrEqual(tb, 2, 1, "step %d", 3) }},
		{"inDelta", func(tb testing.TB) { inDelta(tb, 1, 1.5, 0.5) }, func(tb testing.TB) { inDelta(tb, 1, 1.6, 0.5, "step %d", 3) }},
	} {
		pass, fail := &recorder{TB: t}, &recorder{TB: t}
		c.pass(pass)
		c.fail(fail)
		if pass.failed != "" {
			t.Errorf("%s failed where it should pass: %s", c.name, pass.failed)
		}
		if want := "step 3"; !strings.Contains(fail.failed, want) {
			t.Errorf("%s: failure %q does not carry %q", c.name, fail.failed, want)
		}
	}
}
