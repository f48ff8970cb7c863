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

// benchRead reads a log of 10,000 lines of the format.
func benchRead(b *testing.B, format Format) {
	benchReadData(b, benchLog(format, 10000), Options{Format: format})
}

// benchReadData reads data b.N times over and reports lines per second.
func benchReadData(b *testing.B, data []byte, opts Options) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	var n int64
	for b.Loop() {
		rd, err := NewReader(bytes.NewReader(data), opts)
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

// BenchmarkReadJSONNested reads Caddy's nested fields by their paths.
func BenchmarkReadJSONNested(b *testing.B) {
	var log bytes.Buffer
	for i := range 10000 {
		fmt.Fprintf(&log, `{"level":"info","ts":%d.123,"logger":"http.log.access","msg":"handled request","request":{"remote_ip":"10.0.%d.%d","proto":"HTTP/1.1","method":"GET","host":"example.com","uri":"/items/%d?x=1","headers":{"User-Agent":["curl/8.5"]}},"status":200}`+"\n",
			1791666936+i/100, i%1000/250, i%250, i%100)
	}
	benchReadData(b, log.Bytes(), Options{Format: JSON, Fields: FieldNames{Time: "ts", Client: "request.remote_ip", Method: "request.method", Path: "request.uri"}})
}
