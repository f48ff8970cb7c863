// Package demolog generates the access log that docs/choosing.md replays:
// three hours of a multi-tenant API's traffic, in the combined format,
// identical on every run. Its clients are what a limit must tell apart:
//
//   - 40 steady clients, each at its own Poisson rate of 1 to 10 requests
//     a minute;
//   - 20 mobile apps that sync every 15 minutes with 30 requests at once:
//     2 a minute on average, 30 in a second at each sync;
//   - a scraper at 150 a minute from 09:30 to 10:30;
//   - a retry storm: one client's 1,500 requests from 10:59:30 to
//     11:01:30;
//   - three hosts of one IPv6 /64 at 40 a minute each from 10:00 to
//     10:30, which a limit keyed by client address counts as one client.
//
// Routes are GET /items/{id} (80%), GET /items (15%) and POST /reports
// (5%).
package demolog

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Start and End bound the log: Tuesday 24 November 2026, 09:00 to 12:00
// UTC.
var (
	Start = time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	End   = Start.Add(3 * time.Hour)
)

type event struct {
	at     time.Time
	client string
	route  int // index into routes, -1: chosen at random
}

var routes = []struct{ method, path string }{{"GET", "/items/%d"}, {"GET", "/items"}, {"POST", "/reports"}}

// Write writes the log to w.
func Write(w io.Writer) error {
	rng := rand.New(rand.NewPCG(24, 11))
	var events []event
	add := func(at time.Time, client string) { events = append(events, event{at: at, client: client, route: -1}) }

	for i := range 40 {
		client := fmt.Sprintf("198.51.100.%d", 10+i)
		perMinute := 1 + 9*rng.Float64()
		for at := Start; ; {
			at = at.Add(time.Duration(rng.ExpFloat64() / perMinute * float64(time.Minute)))
			if !at.Before(End) {
				break
			}
			add(at, client)
		}
	}
	for i := range 20 {
		client := fmt.Sprintf("203.0.113.%d", 20+i)
		offset := time.Duration(rng.IntN(15*60)) * time.Second
		for sync := Start.Add(offset); sync.Before(End); sync = sync.Add(15 * time.Minute) {
			for range 30 {
				add(sync.Add(time.Duration(rng.IntN(1000))*time.Millisecond), client)
			}
		}
	}
	for at := Start.Add(30 * time.Minute); at.Before(Start.Add(90 * time.Minute)); at = at.Add(400 * time.Millisecond) {
		add(at, "192.0.2.66")
	}
	for i := range 1500 {
		add(Start.Add(2*time.Hour-30*time.Second+time.Duration(i)*80*time.Millisecond), "192.0.2.99")
	}
	for _, host := range []string{"2001:db8:7:1::a", "2001:db8:7:1::b", "2001:db8:7:1::c"} {
		for at := Start.Add(time.Hour); at.Before(Start.Add(90 * time.Minute)); at = at.Add(1500 * time.Millisecond) {
			add(at.Add(time.Duration(rng.IntN(1000))*time.Millisecond), host)
		}
	}
	slices.SortStableFunc(events, func(a, b event) int { return a.at.Compare(b.at) })

	bw := bufio.NewWriter(w)
	for _, e := range events {
		r := routes[0]
		switch p := rng.Float64(); {
		case p >= 0.95:
			r = routes[2]
		case p >= 0.80:
			r = routes[1]
		}
		path := r.path
		if r.path == "/items/%d" {
			path = fmt.Sprintf(r.path, 1+int(math.Floor(rng.Float64()*5000)))
		}
		fmt.Fprintf(bw, "%s - - [%s] \"%s %s HTTP/1.1\" 200 %d \"-\" \"demo/1.0\"\n",
			e.client, e.at.Format("02/Jan/2006:15:04:05 -0700"), r.method, path, 200+rng.IntN(2000))
	}
	return bw.Flush()
}
