package sluicetest

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
)

// The kit's assertions: a failure stops the test (t.Fatalf) with what was
// expected and what came. They take testify's message convention (a
// format and its arguments, or nothing), without depending on it.

func message(msgAndArgs []any) string {
	switch {
	case len(msgAndArgs) == 0:
		return ""
	case len(msgAndArgs) == 1:
		return ": " + fmt.Sprint(msgAndArgs[0])
	}
	if format, ok := msgAndArgs[0].(string); ok {
		return ": " + fmt.Sprintf(format, msgAndArgs[1:]...)
	}
	return ": " + fmt.Sprint(msgAndArgs...)
}

func noError(tb testing.TB, err error, msgAndArgs ...any) {
	tb.Helper()
	if err != nil {
		tb.Fatalf("unexpected error: %v%s", err, message(msgAndArgs))
	}
}

func isError(tb testing.TB, err error, msgAndArgs ...any) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("an error was expected%s", message(msgAndArgs))
	}
}

func errorIs(tb testing.TB, err, target error, msgAndArgs ...any) {
	tb.Helper()
	if !errors.Is(err, target) {
		tb.Fatalf("error %v does not wrap %v%s", err, target, message(msgAndArgs))
	}
}

func notErrorIs(tb testing.TB, err, target error, msgAndArgs ...any) {
	tb.Helper()
	if errors.Is(err, target) {
		tb.Fatalf("error %v wraps %v%s", err, target, message(msgAndArgs))
	}
}

func equal(tb testing.TB, want, got any, msgAndArgs ...any) {
	tb.Helper()
	if !reflect.DeepEqual(want, got) {
		tb.Fatalf("not equal%s\n want: %#v\n  got: %#v", message(msgAndArgs), want, got)
	}
}

func isTrue(tb testing.TB, cond bool, msgAndArgs ...any) {
	tb.Helper()
	if !cond {
		tb.Fatalf("should be true%s", message(msgAndArgs))
	}
}

func isFalse(tb testing.TB, cond bool, msgAndArgs ...any) {
	tb.Helper()
	if cond {
		tb.Fatalf("should be false%s", message(msgAndArgs))
	}
}

func greater[T cmp.Ordered](tb testing.TB, a, b T, msgAndArgs ...any) {
	tb.Helper()
	if !(a > b) {
		tb.Fatalf("%v is not greater than %v%s", a, b, message(msgAndArgs))
	}
}

func lessOrEqual[T cmp.Ordered](tb testing.TB, a, b T, msgAndArgs ...any) {
	tb.Helper()
	if !(a <= b) {
		tb.Fatalf("%v is not at most %v%s", a, b, message(msgAndArgs))
	}
}

func inDelta(tb testing.TB, want, got, delta float64, msgAndArgs ...any) {
	tb.Helper()
	if math.IsNaN(got) || math.Abs(want-got) > delta {
		tb.Fatalf("%v is not within %v of %v%s", got, delta, want, message(msgAndArgs))
	}
}
