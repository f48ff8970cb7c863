package accesslog_test

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/replay/accesslog"
)

func Example() {
	log := `203.0.113.7 - - [10/Oct/2026:13:55:36 +0000] "GET /items?page=2 HTTP/1.1" 200 512 "-" "curl/8.5"
2001:db8:aa:bb::1 - - [10/Oct/2026:13:55:37 +0000] "POST /reports HTTP/1.1" 201 64 "-" "curl/8.5"
not a log line
`
	rd, err := accesslog.NewReader(strings.NewReader(log), accesslog.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("format:", rd.Format())
	for rec, ok := rd.Next(); ok; rec, ok = rd.Next() {
		fmt.Println(rec.Line, rec.Time.Format("15:04:05"), rec.Key, rec.Method, rec.Path)
	}
	if err := rd.Err(); err != nil {
		fmt.Println(err)
	}
	n, first := rd.Skipped()
	fmt.Println("skipped:", n, first[0])
	// Output:
	// format: combined
	// 1 13:55:36 203.0.113.7 GET /items
	// 2 13:55:37 2001:db8:aa:bb::/64 POST /reports
	// skipped: 1 line 3: not a common or combined log line: expected `host ident user [time] "request" status bytes`
}
