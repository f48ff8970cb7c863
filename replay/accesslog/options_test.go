package accesslog

import (
	"strings"
	"testing"
)

// TestKeyFieldErrors: the errors about KeyFrom speak of the key field,
// as the user gives it (sluice replay --key), not of the option.
func TestKeyFieldErrors(t *testing.T) {
	for _, tt := range []struct {
		opts  Options
		input string
		err   string
	}{
		{Options{Format: Common, KeyFrom: "referer"}, "", `accesslog: the key field "referer" needs the combined format, not common`},
		{Options{Format: Combined, KeyFrom: "cookie"}, "", `accesslog: the key field "cookie" is not in the combined format: key by client, user, referer or user_agent`},
		{Options{Format: Common, KeyFrom: "cookie"}, "", `accesslog: the key field "cookie" is not in the common format: key by client or user (referer and user_agent need the combined format)`},
		{Options{Format: CSV, KeyFrom: "api_key"}, "time,remote_addr\n", `accesslog: CSV header (line 1) has no "api_key" column for the key field (columns: time,remote_addr)`},
	} {
		_, err := NewReader(strings.NewReader(tt.input), tt.opts)
		if err == nil || err.Error() != tt.err {
			t.Errorf("NewReader(%q, %+v) = %v\nwant %s", tt.input, tt.opts, err, tt.err)
		}
	}
}
