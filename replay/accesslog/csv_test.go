package accesslog

import (
	"reflect"
	"testing"
	"time"
)

func TestCSVTrimsSpacesAroundCells(t *testing.T) {
	input := "time, remote_addr ,method,\tpath\n" +
		"2026-10-10T20:55:36Z, 192.0.2.1 , GET ,\t/a b\t\n" +
		`1791666936,  "192.0.2.2"  ,"GET", "/say ""hi"", x"` + "\n" +
		`1791666936,192.0.2.3, " POST",/` + "\n" +
		`1791666936,192.0.2.3,"GET" x,/` + "\n"
	recs, rd := readAll(t, input, Options{Format: CSV})
	want := []Record{
		{Time: time.Date(2026, 10, 10, 20, 55, 36, 0, time.UTC), Key: "192.0.2.1", Method: "GET", Path: "/a b", Cost: 1, Line: 2},
		{Time: time.Unix(1791666936, 0).UTC(), Key: "192.0.2.2", Method: "GET", Path: `/say "hi", x`, Cost: 1, Line: 3},
		{Time: time.Unix(1791666936, 0).UTC(), Key: "192.0.2.3", Method: " POST", Path: "/", Cost: 1, Line: 4},
	}
	if len(recs) != len(want) {
		t.Fatalf("records %+v", recs)
	}
	for i := range recs {
		if !recs[i].Time.Equal(want[i].Time) {
			t.Errorf("record %d: time %v", i, recs[i].Time)
		}
		recs[i].Time, want[i].Time = time.Time{}, time.Time{}
		if !reflect.DeepEqual(recs[i], want[i]) {
			t.Errorf("record %d:\n got %+v\nwant %+v", i, recs[i], want[i])
		}
	}
	if n, bad := rd.Skipped(); n != 1 || bad[0] != (LineError{5, "CSV: text after a quoted cell"}) {
		t.Errorf("Skipped() = %d, %v", n, bad)
	}
}
