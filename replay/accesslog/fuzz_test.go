package accesslog

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"
)

// FuzzReader feeds arbitrary input under every format: the Reader never
// panics, every line is either a record or a counted skip, and records
// come in line order with a key.
func FuzzReader(f *testing.F) {
	f.Add([]byte(combinedLine+"\n"+commonLine+"\nbad\n"), uint8(0))
	f.Add([]byte(`{"time":"2026-10-10T20:55:36Z","remote_addr":"::1","cost":2}`+"\n"), uint8(3))
	f.Add([]byte("time,remote_addr\n1,192.0.2.1\n\"x,\"\"\n"), uint8(4))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(commonLine + "\n"))
	zw.Close()
	f.Add(gz.Bytes(), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, format uint8) {
		rd, err := NewReader(bytes.NewReader(data), Options{Format: Format(format % 5), MaxLineErrors: 5})
		if err != nil {
			return
		}
		var recs, last int64
		for rec, ok := rd.Next(); ok; rec, ok = rd.Next() {
			if rec.Line <= last || rec.Key == "" || rec.Cost < 1 {
				t.Fatalf("record %+v after line %d", rec, last)
			}
			last = rec.Line
			recs++
		}
		skipped, first := rd.Skipped()
		if len(first) > 5 || int64(len(first)) > skipped {
			t.Fatalf("Skipped() = %d, %v", skipped, first)
		}
		if rd.Err() == nil && !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
			// Every non-empty line is a record, a skip or the CSV header.
			nonEmpty := int64(0)
			for _, l := range strings.Split(string(data), "\n") {
				if len(bytes.TrimSpace([]byte(strings.TrimSuffix(l, "\r")))) > 0 {
					nonEmpty++
				}
			}
			if rd.Format() == CSV {
				nonEmpty--
			}
			if recs+skipped != nonEmpty {
				t.Fatalf("%d records + %d skipped != %d non-empty lines", recs, skipped, nonEmpty)
			}
		}
	})
}
