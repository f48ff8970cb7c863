package accesslog

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestDetectSkipsOverlongLines(t *testing.T) {
	long := strings.Repeat("x", MaxLineBytes+10)
	tooLong := "line longer than 65536 bytes"
	tests := []struct {
		name, input string
		want        Format
		lines       []int64
		bad         []LineError
	}{{
		name:  "first line",
		input: long + "\n" + combinedLine + "\n" + combinedLine + "\n",
		want:  Combined, lines: []int64{2, 3},
		bad: []LineError{{1, tooLong}},
	}, {
		name:  "among garbage, in line order",
		input: "garbage\n" + long + "\n\n" + long + "\n" + long + "\n" + `{"time":1,"remote_addr":"192.0.2.1"}` + "\n" + long,
		want:  JSON, lines: []int64{6},
		bad: []LineError{{1, "not a JSON object: invalid character 'g' looking for beginning of value"}, {2, tooLong}, {4, tooLong}, {5, tooLong}, {7, tooLong}},
	}, {
		name:  "before a CSV header",
		input: long + "\ntime,remote_addr\n1,192.0.2.1\n",
		want:  CSV, lines: []int64{3},
		bad: []LineError{{1, tooLong}},
	}, {
		name:  "more than the lines sampled",
		input: strings.Repeat(long+"\n", detectLines+2) + commonLine + "\n",
		want:  Common, lines: []int64{detectLines + 3},
		bad: []LineError{{1, tooLong}, {2, tooLong}, {3, tooLong}, {4, tooLong}, {5, tooLong}, {6, tooLong}, {7, tooLong}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, rd := readAll(t, tt.input, Options{})
			if rd.Format() != tt.want {
				t.Errorf("Format() = %v, want %v", rd.Format(), tt.want)
			}
			var lines []int64
			for _, r := range recs {
				lines = append(lines, r.Line)
			}
			if !reflect.DeepEqual(lines, tt.lines) {
				t.Errorf("records on lines %v, want %v", lines, tt.lines)
			}
			n, bad := rd.Skipped()
			if n != int64(len(tt.bad)) || !reflect.DeepEqual(bad, tt.bad) {
				t.Errorf("Skipped() = %d, %q\nwant %q", n, bad, tt.bad)
			}
		})
	}
}

func TestDetectOnlyOverlongLines(t *testing.T) {
	long := strings.Repeat("x", MaxLineBytes+10)
	_, err := NewReader(strings.NewReader(long+"\n"+long), Options{})
	if err == nil || !strings.Contains(err.Error(), "cannot detect the format: every line is longer than 65536 bytes") {
		t.Errorf("err = %v", err)
	}
}

func TestDetectIgnoresTheLineCutByAGzipBreak(t *testing.T) {
	// A combined log whose stream breaks after the bytes field of line 3:
	// that line would look common.
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	fmt.Fprintf(zw, "%s\n%s\n%s", combinedLine, combinedLine, commonLine)
	zw.Flush()
	recs, rd := readAll(t, buf.String(), Options{KeyFrom: "user_agent"})
	n, bad := rd.Skipped()
	if rd.Format() != Combined || len(recs) != 2 || n != 1 || bad[0].Line != 3 {
		t.Errorf("format %v, %d records, skipped %v", rd.Format(), len(recs), bad)
	}
}
