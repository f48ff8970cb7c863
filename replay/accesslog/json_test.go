package accesslog

import (
	"reflect"
	"testing"
	"time"
)

func TestJSONNestedFields(t *testing.T) {
	caddy := Options{Format: JSON, Fields: FieldNames{Time: "ts", Client: "request.remote_ip", Method: "request.method", Path: "request.uri"}}
	ecs := Options{Format: JSON, Fields: FieldNames{Time: "@timestamp", Client: "client.ip", Method: "http.request.method", Path: "url.path"}}
	ts := time.Unix(1791666936, 5e8).UTC()
	tests := []struct {
		name  string
		opts  Options
		input string
		want  []Record
		bad   []LineError
	}{{
		name: "caddy",
		opts: caddy,
		input: `{"level":"info","ts":1791666936.5,"request":{"remote_ip":"192.0.2.1","proto":"HTTP/2.0","method":"GET","uri":"/a?b=1","headers":{"User-Agent":["curl"]}},"status":200}` + "\n" +
			`{"ts":1791666936.5,"request":{"remote_ip":"192.0.2.1"}}` + "\n" +
			`{"ts":1791666936.5,"request":{}}` + "\n" +
			`{"ts":1791666936.5,"request":"192.0.2.1"}` + "\n" +
			`{"ts":1791666936.5,"requestx":{"remote_ip":"192.0.2.1"},"request.remote_ipx":"192.0.2.1"}` + "\n",
		want: []Record{
			{Time: ts, Key: "192.0.2.1", Method: "GET", Path: "/a", Cost: 1, Line: 1},
			{Time: ts, Key: "192.0.2.1", Cost: 1, Line: 2},
		},
		bad: []LineError{
			{3, `no "request.remote_ip" field (the client address)`},
			{4, `no "request.remote_ip" field (the client address)`},
			{5, `no "request.remote_ip" field (the client address)`},
		},
	}, {
		name: "ecs, nested, flat, or both",
		opts: ecs,
		input: `{"@timestamp":"2026-11-24T08:00:08.5Z","client":{"ip":"192.0.2.2"},"http":{"request":{"method":"POST"}},"url":{"path":"/x"}}` + "\n" +
			`{"@timestamp":"2026-11-24T08:00:08.5Z","client.ip":"192.0.2.3","http.request.method":"PUT","url.path":"/y"}` + "\n" +
			`{"@timestamp":"2026-11-24T08:00:08.5Z","cli\u0065nt":{"geo":{"ip":"x"},"ip":"192.0.2.4"},"http":{"request.method":"GET"}}` + "\n",
		want: []Record{
			{Time: time.Date(2026, 11, 24, 8, 0, 8, 5e8, time.UTC), Key: "192.0.2.2", Method: "POST", Path: "/x", Cost: 1, Line: 1},
			{Time: time.Date(2026, 11, 24, 8, 0, 8, 5e8, time.UTC), Key: "192.0.2.3", Method: "PUT", Path: "/y", Cost: 1, Line: 2},
			{Time: time.Date(2026, 11, 24, 8, 0, 8, 5e8, time.UTC), Key: "192.0.2.4", Method: "GET", Cost: 1, Line: 3},
		},
	}, {
		name: "keyed by a nested field",
		opts: Options{Format: JSON, KeyFrom: "user.id"},
		input: `{"time":1791666936.5,"user":{"id":"u1"}}` + "\n" +
			`{"time":1791666936.5,"user":{"id":""}}` + "\n",
		want: []Record{{Time: ts, Key: "u1", Cost: 1, Line: 1}},
		bad:  []LineError{{2, `no key: field "user.id" is empty or missing`}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, rd := readAll(t, tt.input, tt.opts)
			for i := range recs {
				if i < len(tt.want) && recs[i].Time.Equal(tt.want[i].Time) {
					recs[i].Time = tt.want[i].Time
				}
			}
			if !reflect.DeepEqual(recs, tt.want) {
				t.Errorf("records\n%+v\nwant\n%+v", recs, tt.want)
			}
			if n, bad := rd.Skipped(); n != int64(len(tt.bad)) || !reflect.DeepEqual(bad, tt.bad) {
				t.Errorf("Skipped() = %d, %q\nwant %q", n, bad, tt.bad)
			}
		})
	}
}

func TestJSONNestedFieldsInCSVAreColumnNames(t *testing.T) {
	recs, _ := readAll(t, "time,client.ip\n1791666936,192.0.2.1\n", Options{Format: CSV, Fields: FieldNames{Client: "client.ip"}})
	if len(recs) != 1 || recs[0].Key != "192.0.2.1" {
		t.Errorf("records %+v", recs)
	}
}
