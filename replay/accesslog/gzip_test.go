package accesslog

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// gzipped compresses lines, one member per call of each slice.
func gzipped(members ...[]string) []byte {
	var buf bytes.Buffer
	for _, lines := range members {
		zw := gzip.NewWriter(&buf)
		for _, l := range lines {
			fmt.Fprintln(zw, l)
		}
		zw.Close()
	}
	return buf.Bytes()
}

// linesOf is n distinct common-format lines.
func linesOf(n int) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = strings.Replace(commonLine, "/items?id=1", fmt.Sprintf("/items/%d", i+1), 1)
	}
	return lines
}

func TestGzipMultiMember(t *testing.T) {
	recs, rd := readAll(t, string(gzipped(linesOf(2), linesOf(3))), Options{})
	if len(recs) != 5 || recs[4].Line != 5 || recs[4].Path != "/items/3" {
		t.Errorf("records %+v, want 5", recs)
	}
	if n, _ := rd.Skipped(); n != 0 {
		t.Errorf("skipped %d", n)
	}
}

func TestGzipTruncatedEndsCleanly(t *testing.T) {
	lines := linesOf(20000)
	whole := gzipped(lines)
	for _, format := range []Format{Auto, Common} {
		cut := whole[:len(whole)/2]
		recs, rd := readAll(t, string(cut), Options{Format: format})
		if len(recs) < 100 || len(recs) >= len(lines) {
			t.Fatalf("%v: %d records from half the stream", format, len(recs))
		}
		for i, rec := range recs {
			if rec.Line != int64(i+1) || rec.Path != fmt.Sprintf("/items/%d", i+1) {
				t.Fatalf("%v: record %d is %+v: a cut line was returned", format, i, rec)
			}
		}
		n, first := rd.Skipped()
		want := LineError{int64(len(recs) + 1), fmt.Sprintf("gzip stream truncated after line %d: unexpected EOF", len(recs))}
		if n != 1 || len(first) != 1 || first[0] != want {
			t.Errorf("%v: Skipped() = %d, %v; want 1, %v", format, n, first, want)
		}
		if _, ok := rd.Next(); ok {
			t.Error("a record after the end")
		}
		if n2, _ := rd.Skipped(); n2 != 1 {
			t.Errorf("the truncation is counted %d times", n2)
		}
	}
}

func TestGzipTrailingGarbageEndsCleanly(t *testing.T) {
	data := append(gzipped(linesOf(3)), "garbage after the stream\n"...)
	recs, rd := readAll(t, string(data), Options{})
	if len(recs) != 3 {
		t.Errorf("%d records, want 3", len(recs))
	}
	n, first := rd.Skipped()
	if n != 1 || len(first) != 1 || first[0] != (LineError{4, "gzip stream corrupt after line 3: gzip: invalid header"}) {
		t.Errorf("Skipped() = %d, %v", n, first)
	}
}

func TestGzipCorruptDataEndsCleanly(t *testing.T) {
	data := gzipped(linesOf(2000))
	for i := len(data) / 2; i < len(data)/2+64; i++ {
		data[i] ^= 0x55
	}
	_, rd := readAll(t, string(data), Options{Format: Common, MaxLineErrors: 1 << 20})
	n, first := rd.Skipped()
	if n == 0 || !strings.HasPrefix(first[len(first)-1].Reason, "gzip stream corrupt after line ") {
		t.Errorf("Skipped() = %d, %v", n, first)
	}
}

// brokenReader returns data then err.
type brokenReader struct {
	data []byte
	err  error
}

func (b *brokenReader) Read(p []byte) (int, error) {
	if len(b.data) == 0 {
		return 0, b.err
	}
	n := copy(p, b.data)
	b.data = b.data[n:]
	return n, nil
}

func TestGzipIOErrorStaysAnError(t *testing.T) {
	whole := gzipped(linesOf(20000))
	for _, ioErr := range []error{errors.New("disk on fire"), io.ErrUnexpectedEOF} {
		rd, err := NewReader(&brokenReader{whole[:len(whole)/2], ioErr}, Options{Format: Common})
		if err != nil {
			t.Fatal(err)
		}
		for _, ok := rd.Next(); ok; _, ok = rd.Next() {
		}
		if rd.Err() != ioErr {
			t.Errorf("Err() = %v, want %v", rd.Err(), ioErr)
		}
		if n, first := rd.Skipped(); n != 0 {
			t.Errorf("Skipped() = %d, %v", n, first)
		}
	}
}
