package accesslog

import (
	"strings"
	"testing"
)

func TestGarbageCLFLineSaysWhatWasExpected(t *testing.T) {
	const want = "not a common or combined log line: expected `host ident user [time] \"request\" status bytes`"
	input := strings.Join([]string{
		"garbage",
		"two words",
		"not a log line",
		" leading space - - [10/Oct/2026:13:55:36 -0700]",
		`192.0.2.1 - - 10/Oct/2026:13:55:36 -0700 "GET / HTTP/1.1" 200 1`,
	}, "\n")
	_, rd := readAll(t, input, Options{Format: Common})
	n, bad := rd.Skipped()
	if n != 5 {
		t.Fatalf("skipped %d, want 5", n)
	}
	for _, e := range bad {
		if e.Reason != want {
			t.Errorf("line %d: %q, want %q", e.Line, e.Reason, want)
		}
	}
}
