package accesslog

import (
	"strings"
	"testing"
	"time"
)

// TestTimeFormats holds the formats FieldNames.Time documents, as JSON
// strings and, for numbers, as JSON numbers too.
func TestTimeFormats(t *testing.T) {
	utc := func(s string) time.Time {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			panic(err)
		}
		return t
	}
	for _, tt := range []struct {
		in   string
		want time.Time // zero: refused
	}{
		// RFC 3339, as before
		{"2026-11-24T08:00:08Z", utc("2026-11-24T08:00:08Z")},
		{"2026-10-10T20:55:36.25Z", utc("2026-10-10T20:55:36.25Z")},
		{"2026-11-24T08:00:08.123456789-05:30", utc("2026-11-24T13:30:08.123456789Z")},
		{"2026-11-24t08:00:08z", utc("2026-11-24T08:00:08Z")},
		// a space for the T, with or without fractions and offsets
		{"2026-11-24 08:00:08", utc("2026-11-24T08:00:08Z")},
		{"2026-11-24 08:00:08.123", utc("2026-11-24T08:00:08.123Z")},
		{"2026-11-24 08:00:08,123", utc("2026-11-24T08:00:08.123Z")},
		{"2026-11-24 08:00:08+01:00", utc("2026-11-24T07:00:08Z")},
		{"2026-11-24 08:00:08.5 +0100", utc("2026-11-24T07:00:08.5Z")},
		{"2026-11-24 08:00:08 UTC", utc("2026-11-24T08:00:08Z")},
		{"2026-11-24 08:00:08.1234567891Z", utc("2026-11-24T08:00:08.123456789Z")},
		// offsets without a colon, or hours only; no offset is UTC
		{"2026-11-24T08:00:08+0000", utc("2026-11-24T08:00:08Z")},
		{"2026-11-24T08:00:08-0700", utc("2026-11-24T15:00:08Z")},
		{"2026-11-24T08:00:08+02", utc("2026-11-24T06:00:08Z")},
		{"2026-11-24T08:00:08", utc("2026-11-24T08:00:08Z")},
		// the common log time
		{"10/Oct/2026:13:55:36 -0700", utc("2026-10-10T20:55:36Z")},
		{"[10/Oct/2026:13:55:36 -0700]", utc("2026-10-10T20:55:36Z")},
		// Unix times by magnitude
		{"1791666936", time.Unix(1791666936, 0)},
		{"1791666936.5", time.Unix(1791666936, 5e8)},
		{"99999999999", time.Unix(99999999999, 0)},
		{"1791666936500", time.Unix(1791666936, 5e8)},
		{"1791666936500.25", time.Unix(1791666936, 500250000)},
		{"1791666936500123", time.Unix(1791666936, 500123000)},
		{"1791666936500123.5", time.Unix(1791666936, 500123500)},
		{"1791666936500123456", time.Unix(1791666936, 500123456)},
		{"18446744073709551615", time.Unix(18446744073, 709551615)},
		// refused
		{"18446744073709551616", time.Time{}},
		{"2026-13-24 08:00:08", time.Time{}},
		{"2026-02-29 08:00:08", time.Time{}},
		{"2026-11-24 24:00:00", time.Time{}},
		{"2026-11-24 08:00", time.Time{}},
		{"2026-11-24  08:00:08", time.Time{}},
		{"2026-11-24 08:00:08+24:00", time.Time{}},
		{"2026-11-24 08:00:08.", time.Time{}},
		{"2026-11-24 08:00:08+01:0", time.Time{}},
		{"2026-11-24 08:00:08 ", time.Time{}},
		{"2026-11-24 08:00:08 junk", time.Time{}},
		{"2026-11-24_08:00:08", time.Time{}},
		{"yesterday", time.Time{}},
	} {
		inputs := []string{`"` + tt.in + `"`}
		if isNumber([]byte(tt.in)) {
			inputs = append(inputs, tt.in)
		}
		for _, v := range inputs {
			recs, rd := readAll(t, `{"time":`+v+`,"remote_addr":"192.0.2.1"}`, Options{Format: JSON})
			switch {
			case tt.want.IsZero():
				if n, bad := rd.Skipped(); len(recs) != 0 || n != 1 || !strings.HasPrefix(bad[0].Reason, "time ") {
					t.Errorf("%s: records %v, skipped %v; want it refused", v, recs, bad)
				}
			case len(recs) != 1:
				_, bad := rd.Skipped()
				t.Errorf("%s: refused: %v", v, bad)
			case !recs[0].Time.Equal(tt.want):
				t.Errorf("%s: %v, want %v", v, recs[0].Time.UTC(), tt.want.UTC())
			}
		}
	}
}

func TestTimeErrorNamesTheFormats(t *testing.T) {
	_, rd := readAll(t, "time,remote_addr\nyesterday,192.0.2.1\n", Options{Format: CSV})
	want := `time "yesterday" is not RFC 3339, 2006-01-02 15:04:05, [02/Jan/2006:15:04:05 -0700] or a Unix time`
	if _, bad := rd.Skipped(); len(bad) != 1 || bad[0].Reason != want {
		t.Errorf("Skipped() = %v, want %s", bad, want)
	}
}

func TestTimeWithoutOffsetIsUTC(t *testing.T) {
	recs, _ := readAll(t, "time,remote_addr\n2026-11-24 08:00:08,192.0.2.1\n", Options{Format: CSV})
	if len(recs) != 1 || recs[0].Time.Location() != time.UTC || recs[0].Time.Hour() != 8 {
		t.Errorf("records %+v", recs)
	}
}
