package accesslog

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/httplimit"
)

// readAll reads every record of input with opts.
func readAll(t *testing.T, input string, opts Options) ([]Record, *Reader) {
	t.Helper()
	rd, err := NewReader(strings.NewReader(input), opts)
	if err != nil {
		t.Fatalf("NewReader: %v", err)
	}
	var recs []Record
	for rec, ok := rd.Next(); ok; rec, ok = rd.Next() {
		recs = append(recs, rec)
	}
	if err := rd.Err(); err != nil {
		t.Fatalf("Err: %v", err)
	}
	return recs, rd
}

var (
	minus7 = time.FixedZone("", -7*3600)
	t0     = time.Date(2026, 10, 10, 13, 55, 36, 0, minus7)
)

const (
	commonLine   = `192.0.2.1 - frank [10/Oct/2026:13:55:36 -0700] "GET /items?id=1 HTTP/1.1" 200 2326`
	combinedLine = commonLine + ` "http://example.com/" "Mozilla/5.0 (X11; Linux x86_64)"`
)

func TestFormats(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		input string
		want  []Record
		bad   []LineError
	}{{
		name:  "common",
		opts:  Options{Format: Common},
		input: commonLine + "\n\n" + `2001:db8:1:2:3:4:5:6 - - [10/Oct/2026:13:55:37 +0000] "POST /reports HTTP/1.1" 201 -` + "\n",
		want: []Record{
			{Time: t0, Key: "192.0.2.1", Method: "GET", Path: "/items", Cost: 1, Line: 1},
			{Time: time.Date(2026, 10, 10, 13, 55, 37, 0, time.UTC), Key: "2001:db8:1:2::/64", Method: "POST", Path: "/reports", Cost: 1, Line: 3},
		},
	}, {
		name: "common: bad lines",
		opts: Options{Format: Common},
		input: strings.Join([]string{
			commonLine,
			`192.0.2.1`,
			`192.0.2.1 - - 10/Oct/2026:13:55:36 -0700 "GET / HTTP/1.1" 200 1`,
			`192.0.2.1 - - [10/Oct/2026:13:55:36 -0700 "GET / HTTP/1.1" 200 1`,
			`192.0.2.1 - - [10/Oct/2026:13:55:36 -0700] GET / HTTP/1.1 200 1`,
			`192.0.2.1 - - [10/Oct/2026:13:55:36 -0700] "GET / HTTP/1.1" OK 1`,
			`192.0.2.1 - - [29/Feb/2100:13:55:36 -0700] "GET / HTTP/1.1" 200 1`,
			`192.0.2.1 - - [10/Oct/2026:13:55:36 -0700] "\x16\x03\x01" 400 1`,
			`example.com - - [10/Oct/2026:13:55:36 -0700] "GET / HTTP/1.1" 200 1`,
			`192.0.2.1 - - [10/Oct/2026:13:55:36 -0700] "GET / HTTP/1.1" 200`,
		}, "\n"),
		want: []Record{{Time: t0, Key: "192.0.2.1", Method: "GET", Path: "/items", Cost: 1, Line: 1}},
		bad: []LineError{
			{2, notCLF},
			{3, notCLF},
			{4, "unterminated [time"},
			{5, "no quoted request line after the time"},
			{6, `status "OK" is not a 3-digit code`},
			{7, `time "29/Feb/2100:13:55:36 -0700" is not [02/Jan/2006:15:04:05 -0700]`},
			{8, `request line "\\x16\\x03\\x01" is not METHOD PATH PROTOCOL`},
			{9, `client address "example.com" is not an IP address`},
			{10, "no bytes field"},
		},
	}, {
		name:  "combined, keyed by user agent",
		opts:  Options{Format: Combined, KeyFrom: "user_agent"},
		input: combinedLine + "\n" + commonLine + "\n" + strings.Replace(combinedLine, `"Mozilla/5.0 (X11; Linux x86_64)"`, `"-"`, 1),
		want:  []Record{{Time: t0, Key: "Mozilla/5.0 (X11; Linux x86_64)", Method: "GET", Path: "/items", Cost: 1, Line: 1}},
		bad: []LineError{
			{2, "no quoted referer and user agent (a common-format line in a combined log)"},
			{3, "no key: user_agent is empty or missing"},
		},
	}, {
		name: "json",
		opts: Options{Format: JSON, Fields: FieldNames{Time: "ts", Client: "ip"}},
		input: `{"ts":"2026-10-10T20:55:36.25Z","ip":"::ffff:192.0.2.9","method":"GET","path":"/a?b","route":"GET /a","cost":3}` + "\n" +
			`{"ts":1791666936,"ip":"192.0.2.1"}` + "\n" +
			`{"ts":1791666936500,"ip":"192.0.2.1"}` + "\n" +
			`{"ts":"1791666936.5","ip":"192.0.2.1"}` + "\n" +
			`{"ts":"10/Oct/2026:13:55:36 -0700","ip":"192.0.2.1","method":null}` + "\n" +
			`not json` + "\n" +
			`{"ip":"192.0.2.1"}` + "\n" +
			`{"ts":"yesterday","ip":"192.0.2.1"}` + "\n" +
			`{"ts":1791666936,"ip":"192.0.2.1","cost":0}` + "\n" +
			`{"ts":1791666936}` + "\n" +
			`{"ts":1791666936,"ip":true}` + "\n" +
			`{"meta":{"ts":"x","a":[1,{"b":"}\""}]}, "t\u0073" : 1791666936 ,"ip":"192.0.2.2","ts2":[]}` + "\n" +
			`[1]` + "\n",
		want: []Record{
			{Time: time.Date(2026, 10, 10, 20, 55, 36, 25e7, time.UTC), Key: "192.0.2.9", Route: "GET /a", Method: "GET", Path: "/a", Cost: 3, Line: 1},
			{Time: time.Unix(1791666936, 0).UTC(), Key: "192.0.2.1", Cost: 1, Line: 2},
			{Time: time.Unix(1791666936, 5e8).UTC(), Key: "192.0.2.1", Cost: 1, Line: 3},
			{Time: time.Unix(1791666936, 5e8).UTC(), Key: "192.0.2.1", Cost: 1, Line: 4},
			{Time: t0, Key: "192.0.2.1", Cost: 1, Line: 5},
			{Time: time.Unix(1791666936, 0).UTC(), Key: "192.0.2.2", Cost: 1, Line: 12},
		},
		bad: []LineError{
			{6, "not a JSON object: invalid character 'o' in literal null (expecting 'u')"},
			{7, `no "ts" field`},
			{8, `time "yesterday" is not RFC 3339, 2006-01-02 15:04:05, [02/Jan/2006:15:04:05 -0700] or a Unix time`},
			{9, `cost "0" is not a positive integer`},
			{10, `no "ip" field (the client address)`},
			{11, `field "ip" is true, not a string or a number`},
			{13, "not a JSON object"},
		},
	}, {
		name:  "json keyed by a field",
		opts:  Options{Format: JSON, KeyFrom: "api_key"},
		input: `{"time":1791666936,"api_key":"k1"}` + "\n" + `{"time":1791666936,"api_key":""}` + "\n" + `{"time":1791666936,"api_key":"` + strings.Repeat("x", 65) + `"}`,
		want: []Record{
			{Time: time.Unix(1791666936, 0).UTC(), Key: "k1", Cost: 1, Line: 1},
			{Time: time.Unix(1791666936, 0).UTC(), Key: headerKey(strings.Repeat("x", 65)), Cost: 1, Line: 3},
		},
		bad: []LineError{{2, `no key: field "api_key" is empty or missing`}},
	}, {
		name: "csv",
		opts: Options{Format: CSV},
		input: "time,remote_addr,method,path,cost\n" +
			`2026-10-10T20:55:36Z,2001:db8::1,POST,"/a,b",2` + "\n" +
			`1791666936,192.0.2.1,GET,"/say ""hi""",` + "\n" +
			`1791666936,192.0.2.1,GET` + "\n" +
			`1791666936,192.0.2.1,GET,"/x,1` + "\n" +
			`1791666936,192.0.2.1,GET,/x"y,1` + "\n",
		want: []Record{
			{Time: time.Date(2026, 10, 10, 20, 55, 36, 0, time.UTC), Key: "2001:db8::/64", Method: "POST", Path: "/a,b", Cost: 2, Line: 2},
			{Time: time.Unix(1791666936, 0).UTC(), Key: "192.0.2.1", Method: "GET", Path: `/say "hi"`, Cost: 1, Line: 3},
		},
		bad: []LineError{
			{4, "3 cells, the header has 5"},
			{5, "CSV: unterminated quoted cell"},
			{6, `CSV: a '"' inside an unquoted cell`},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, rd := readAll(t, tt.input, tt.opts)
			if len(recs) != len(tt.want) {
				t.Fatalf("got %d records %+v, want %d", len(recs), recs, len(tt.want))
			}
			for i := range recs {
				got, want := recs[i], tt.want[i]
				if !got.Time.Equal(want.Time) {
					t.Errorf("record %d: time %v, want %v", i, got.Time, want.Time)
				}
				got.Time, want.Time = time.Time{}, time.Time{}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("record %d:\n got %+v\nwant %+v", i, got, want)
				}
			}
			n, bad := rd.Skipped()
			if n != int64(len(tt.bad)) || !reflect.DeepEqual(bad, tt.bad) && len(tt.bad) > 0 {
				t.Errorf("Skipped() = %d, %q\nwant %d, %q", n, bad, len(tt.bad), tt.bad)
			}
		})
	}
}

// headerKey is how httplimit.Header keys a request with v in a header.
func headerKey(v string) string {
	r := &http.Request{Header: http.Header{"K": {v}}}
	k, err := httplimit.Header("K")(r)
	if err != nil {
		panic(err)
	}
	return k
}

func TestCLFTimeKeepsItsZone(t *testing.T) {
	recs, _ := readAll(t, commonLine+"\n", Options{Format: Common})
	if _, off := recs[0].Time.Zone(); off != -7*3600 {
		t.Errorf("zone offset %d, want -25200", off)
	}
	leap := strings.Replace(commonLine, "10/Oct/2026", "29/Feb/2000", 1)
	if recs, _ := readAll(t, leap, Options{Format: Common}); len(recs) != 1 || recs[0].Time.Day() != 29 {
		t.Errorf("29 Feb 2000: %+v", recs)
	}
}

func TestDetect(t *testing.T) {
	tests := []struct {
		name, input string
		want        Format
		err         string
	}{
		{"common", "\n" + commonLine + "\n" + combinedLine + "\n", Common, ""},
		{"combined", combinedLine + "\ngarbage\n" + combinedLine, Combined, ""},
		{"json", `{"time":1,"remote_addr":"192.0.2.1"}`, JSON, ""},
		{"csv", "remote_addr,time\n192.0.2.1,1\n", CSV, ""},
		{"csv after a byte order mark", "\ufefftime,remote_addr\n1,192.0.2.1\n", CSV, ""},
		{"json then clf", `{"time":1}` + "\n" + commonLine, Auto, "cannot detect the format: the first lines are json and combined (line 2)"},
		{"nothing", "hello\nworld\n", Auto, "none of the first 2 non-empty lines"},
		{"empty", "\n \n", Auto, ErrEmpty.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rd, err := NewReader(strings.NewReader(tt.input), Options{})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one containing %q", err, tt.err)
				}
				if tt.name == "empty" && !errors.Is(err, ErrEmpty) {
					t.Errorf("err = %v, want ErrEmpty", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rd.Format() != tt.want {
				t.Errorf("Format() = %v, want %v", rd.Format(), tt.want)
			}
			if _, ok := rd.Next(); !ok {
				t.Error("no record after detection")
			}
		})
	}
}

func TestOptionErrors(t *testing.T) {
	for _, tt := range []struct {
		opts  Options
		input string
		err   string
	}{
		{Options{Format: 9}, "", "unknown format"},
		{Options{Format: Common, KeyFrom: "referer"}, "", "needs the combined format"},
		{Options{Format: Combined, KeyFrom: "cookie"}, "", `the key field "cookie" is not in the combined format`},
		{Options{Format: CSV}, "", "without a header row"},
		{Options{Format: CSV}, "time,ip\n", `no "remote_addr" column`},
		{Options{Format: CSV}, "time,time\n", `column "time" twice`},
		{Options{Format: CSV}, "\"time\n", "unterminated quoted cell"},
	} {
		if _, err := NewReader(strings.NewReader(tt.input), tt.opts); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("NewReader(%q, %+v) = %v, want an error containing %q", tt.input, tt.opts, err, tt.err)
		}
	}
}

func TestGzip(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	for range 3 {
		fmt.Fprintln(zw, combinedLine)
	}
	zw.Close()
	recs, rd := readAll(t, buf.String(), Options{})
	if rd.Format() != Combined || len(recs) != 3 || recs[2].Line != 3 || recs[2].Key != "192.0.2.1" {
		t.Errorf("format %v, records %+v", rd.Format(), recs)
	}
	if _, err := NewReader(strings.NewReader("\x1f\x8bnot gzip"), Options{}); err == nil || !strings.Contains(err.Error(), "gzip") {
		t.Errorf("a bad gzip header: err = %v", err)
	}
}

func TestIPv6Grouping(t *testing.T) {
	for addr, want := range map[string]string{
		"2001:db8:aa:bb:1::1":   "2001:db8:aa:bb::/64",
		"2001:db8:aa:bb:ffff::": "2001:db8:aa:bb::/64",
		"[2001:db8::1]":         "2001:db8::/64",
		"fe80::1%eth0":          "fe80::/64",
		"::ffff:203.0.113.7":    "203.0.113.7",
		"203.0.113.7":           "203.0.113.7",
	} {
		line := strings.Replace(commonLine, "192.0.2.1", addr, 1)
		recs, _ := readAll(t, line, Options{Format: Common})
		if len(recs) != 1 || recs[0].Key != want {
			t.Errorf("%s: records %+v, want key %s", addr, recs, want)
		}
	}
}

func TestLineErrorsAreBoundedAndCounted(t *testing.T) {
	input := strings.Repeat("bad\n", 10) + strings.Repeat("x", MaxLineBytes+10) + "\n" + commonLine + "\n"
	recs, rd := readAll(t, input, Options{Format: Common, MaxLineErrors: 3})
	n, first := rd.Skipped()
	if n != 11 || len(first) != 3 || first[2].Line != 3 {
		t.Errorf("Skipped() = %d, %v; want 11 and the first 3", n, first)
	}
	if len(recs) != 1 || recs[0].Line != 12 {
		t.Errorf("records %+v, want line 12 only", recs)
	}
	_, rd = readAll(t, strings.Repeat("x", MaxLineBytes+10)+"\n", Options{Format: Common})
	if _, first := rd.Skipped(); len(first) != 1 || first[0] != (LineError{1, "line longer than 65536 bytes"}) {
		t.Errorf("a long line: %v", first)
	}
}

type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n > 0 {
		f.n = 0
		return copy(p, commonLine+"\n"), nil
	}
	return 0, errors.New("disk on fire")
}

func TestIOErrorEndsReading(t *testing.T) {
	rd, err := NewReader(&failingReader{n: 1}, Options{Format: Common})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rd.Next(); !ok {
		t.Fatal("no first record")
	}
	if _, ok := rd.Next(); ok || rd.Err() == nil || rd.Err().Error() != "disk on fire" {
		t.Errorf("Err() = %v, want disk on fire", rd.Err())
	}
}
