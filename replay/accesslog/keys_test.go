package accesslog

import (
	"reflect"
	"strings"
	"testing"
)

// TestKeysFrom: with Options.KeysFrom each record carries one key per
// entry, each keyed as KeyFrom alone would key it (the client address by
// /64 for IPv6, a logged value as a header, even when the two are the
// same text), in JSON, CSV and the combined format; a line missing one
// of them keeps it as "", and is not skipped.
func TestKeysFrom(t *testing.T) {
	for _, tt := range []struct {
		name  string
		opts  Options
		input string
	}{
		{"json", Options{Format: JSON, KeysFrom: []string{"client", "tenant"}},
			`{"time":"2026-10-10T20:55:36Z","remote_addr":"2001:db8::1","tenant":"acme"}` + "\n" +
				`{"time":"2026-10-10T20:55:37Z","remote_addr":"192.0.2.1","tenant":"2001:db8::1"}` + "\n" +
				`{"time":"2026-10-10T20:55:38Z","remote_addr":"192.0.2.1"}` + "\n"},
		{"csv", Options{Format: CSV, KeysFrom: []string{"client", "tenant"}},
			"time,remote_addr,tenant\n" +
				"2026-10-10T20:55:36Z,2001:db8::1,acme\n" +
				"2026-10-10T20:55:37Z,192.0.2.1,2001:db8::1\n" +
				"2026-10-10T20:55:38Z,192.0.2.1,\n"},
		{"combined", Options{Format: Combined, KeysFrom: []string{"client", "user"}},
			`2001:db8::1 - acme [10/Oct/2026:20:55:36 +0000] "GET / HTTP/1.1" 200 1 "-" "x"` + "\n" +
				`192.0.2.1 - 2001:db8::1 [10/Oct/2026:20:55:37 +0000] "GET / HTTP/1.1" 200 1 "-" "x"` + "\n" +
				`192.0.2.1 - - [10/Oct/2026:20:55:38 +0000] "GET / HTTP/1.1" 200 1 "-" "x"` + "\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rd, err := NewReader(strings.NewReader(tt.input), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			var got [][]string
			for {
				rec, ok := rd.Next()
				if !ok {
					break
				}
				if rec.Key != rec.Keys[0] {
					t.Errorf("line %d: Key %q, Keys %q", rec.Line, rec.Key, rec.Keys)
				}
				got = append(got, rec.Keys)
			}
			if want := [][]string{{"2001:db8::/64", "acme"}, {"192.0.2.1", "2001:db8::1"}, {"192.0.2.1", ""}}; !reflect.DeepEqual(got, want) {
				t.Errorf("keys %q, want %q", got, want)
			}
			if n, bad := rd.Skipped(); n != 0 {
				t.Errorf("skipped %d %+v", n, bad)
			}
		})
	}
}

// TestKeysFromRefusesAKeyNotLogged: each entry of KeysFrom is checked as
// KeyFrom is.
func TestKeysFromRefusesAKeyNotLogged(t *testing.T) {
	_, err := NewReader(strings.NewReader("time,remote_addr,tenant\n"), Options{Format: CSV, KeysFrom: []string{"tenant", "api_key"}})
	if want := `accesslog: CSV header (line 1) has no "api_key" column for the key field (columns: time,remote_addr,tenant)`; err == nil || err.Error() != want {
		t.Errorf("%v, want %s", err, want)
	}
	_, err = NewReader(strings.NewReader(""), Options{Format: Common, KeysFrom: []string{"client", "referer"}})
	if want := `accesslog: the key field "referer" needs the combined format, not common`; err == nil || err.Error() != want {
		t.Errorf("%v, want %s", err, want)
	}
}
