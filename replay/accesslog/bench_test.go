package accesslog

import (
	"bytes"
	"fmt"
	"testing"
)

// benchLog is n lines of the format from 1,000 clients.
func benchLog(format Format, n int) []byte {
	var b bytes.Buffer
	if format == CSV {
		b.WriteString("time,remote_addr,method,path\n")
	}
	for i := range n {
		ip := fmt.Sprintf("10.0.%d.%d", i%1000/250, i%250)
		if i%3 == 0 {
			ip = fmt.Sprintf("2001:db8:%x::%x", i%1000, i%7)
		}
		switch format {
		case Common, Combined:
			fmt.Fprintf(&b, `%s - - [10/Oct/2026:13:%02d:%02d +0000] "GET /items/%d?x=1 HTTP/1.1" 200 %d`, ip, i/60%60, i%60, i%100, i)
			if format == Combined {
				b.WriteString(` "https://example.com/" "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0"`)
			}
		case JSON:
			fmt.Fprintf(&b, `{"time":"2026-10-10T13:%02d:%02d.123Z","remote_addr":%q,"method":"GET","path":"/items/%d","status":200}`, i/60%60, i%60, ip, i%100)
		case CSV:
			fmt.Fprintf(&b, `2026-10-10T13:%02d:%02d.123Z,%s,GET,/items/%d`, i/60%60, i%60, ip, i%100)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// benchRead reads the log b.N times over and reports lines per second.
func benchRead(b *testing.B, format Format) {
	const lines = 10000
	data := benchLog(format, lines)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	var n int64
	for b.Loop() {
		rd, err := NewReader(bytes.NewReader(data), Options{Format: format})
		if err != nil {
			b.Fatal(err)
		}
		for _, ok := rd.Next(); ok; _, ok = rd.Next() {
			n++
		}
		if skipped, first := rd.Skipped(); skipped > 0 || rd.Err() != nil {
			b.Fatal(skipped, first, rd.Err())
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "lines/s")
}

func BenchmarkReadCommon(b *testing.B)   { benchRead(b, Common) }
func BenchmarkReadCombined(b *testing.B) { benchRead(b, Combined) }
func BenchmarkReadJSON(b *testing.B)     { benchRead(b, JSON) }
func BenchmarkReadCSV(b *testing.B)      { benchRead(b, CSV) }
