package accesslog

import (
	"bytes"
	"fmt"
	"time"
)

// Which field of a common or combined line keys.
const (
	clfClient = iota
	clfUser
	clfReferer
	clfAgent
)

// clfLine is a common or combined line split into fields, sharing its
// bytes.
type clfLine struct {
	host, user, time, request []byte
	referer, agent            []byte
	combined                  bool
}

// notCLF is the reason for a line that does not start as a common or
// combined line does.
const notCLF = "not a common or combined log line: expected `host ident user [time] \"request\" status bytes`"

// splitCLF splits a common or combined line; the reason is "" if it is one.
func splitCLF(line []byte) (l clfLine, reason string) {
	var ok bool
	if l.host, line, ok = cutSpace(line); !ok || len(l.host) == 0 {
		return l, notCLF
	}
	if _, line, ok = cutSpace(line); !ok {
		return l, notCLF
	}
	if l.user, line, ok = cutSpace(line); !ok || len(line) == 0 || line[0] != '[' {
		return l, notCLF
	}
	end := bytes.IndexByte(line, ']')
	if end < 0 {
		return l, "unterminated [time"
	}
	l.time, line = line[1:end], line[end+1:]
	if l.request, line, ok = quoted(line); !ok {
		return l, "no quoted request line after the time"
	}
	var status []byte
	if status, line, ok = cutSpace(bytes.TrimLeft(line, " ")); !ok || !isStatus(status) {
		return l, fmt.Sprintf("status %q is not a 3-digit code", truncate(status))
	}
	if _, line, ok = cutSpace(line); !ok {
		return l, "no bytes field"
	}
	if l.referer, line, ok = quoted(line); !ok {
		return l, ""
	}
	if l.agent, _, ok = quoted(line); !ok {
		return l, ""
	}
	l.combined = true
	return l, ""
}

// cutSpace returns the field before the next space and the rest after it
// (the whole line and an empty rest at the end).
func cutSpace(b []byte) (field, rest []byte, ok bool) {
	if len(b) == 0 {
		return nil, nil, false
	}
	if i := bytes.IndexByte(b, ' '); i >= 0 {
		return b[:i], b[i+1:], true
	}
	return b, nil, true
}

// quoted returns the contents of the double-quoted string that b starts
// with (after spaces), backslash escapes kept as they are, and the rest.
func quoted(b []byte) (s, rest []byte, ok bool) {
	b = bytes.TrimLeft(b, " ")
	if len(b) == 0 || b[0] != '"' {
		return nil, b, false
	}
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return b[1:i], b[i+1:], true
		}
	}
	return nil, b, false
}

func isStatus(b []byte) bool {
	return len(b) == 3 && b[0] >= '1' && b[0] <= '9' && isDigit(b[1]) && isDigit(b[2])
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (rd *Reader) parseCLF(line []byte, rec *Record) string {
	l, reason := splitCLF(line)
	if reason != "" {
		return reason
	}
	if rd.format == Combined && !l.combined {
		return "no quoted referer and user agent (a common-format line in a combined log)"
	}
	t, ok := rd.zones.parseCLFTime(l.time)
	if !ok {
		return fmt.Sprintf("time %q is not [02/Jan/2006:15:04:05 -0700]", truncate(l.time))
	}
	method, target, ok := splitRequest(l.request)
	if !ok {
		return fmt.Sprintf("request line %q is not METHOD PATH PROTOCOL", truncate(l.request))
	}
	key, keys, reason := rd.recordKeys(func(spec keySpec) (string, string) {
		switch spec.clf {
		case clfUser:
			return rd.valueKey("user", dash(l.user))
		case clfReferer:
			return rd.valueKey("referer", dash(l.referer))
		case clfAgent:
			return rd.valueKey("user_agent", dash(l.agent))
		}
		return rd.clientKey(l.host)
	})
	if reason != "" {
		return reason
	}
	*rec = Record{Time: t, Key: key, Keys: keys, Method: internMethod(method), Path: pathOf(target), Cost: 1}
	return ""
}

// dash returns v, or nil for "-", CLF's empty value.
func dash(v []byte) []byte {
	if string(v) == "-" {
		return nil
	}
	return v
}

// splitRequest splits "METHOD TARGET PROTOCOL" (or "METHOD TARGET", as
// HTTP/0.9 logs it).
func splitRequest(req []byte) (method, target []byte, ok bool) {
	i := bytes.IndexByte(req, ' ')
	if i <= 0 {
		return nil, nil, false
	}
	method, rest := req[:i], req[i+1:]
	for _, c := range method {
		if c < 'A' || c > 'Z' {
			return nil, nil, false
		}
	}
	if j := bytes.IndexByte(rest, ' '); j >= 0 {
		rest = rest[:j]
	}
	if len(rest) == 0 {
		return nil, nil, false
	}
	return method, rest, true
}

var methods = []string{"GET", "POST", "PUT", "DELETE", "HEAD", "PATCH", "OPTIONS", "CONNECT", "TRACE"}

// internMethod returns m as a string, without allocating for the usual
// methods.
func internMethod(m []byte) string {
	for _, s := range methods {
		if string(m) == s {
			return s
		}
	}
	return string(m)
}

// pathOf returns a request target without its query string.
func pathOf(target []byte) string {
	if i := bytes.IndexByte(target, '?'); i >= 0 {
		target = target[:i]
	}
	return string(target)
}

// zoneCache keeps the last time zone offset's *time.Location, since a log
// rarely changes zone.
type zoneCache struct {
	offset int
	loc    *time.Location
}

var monthNames = [12]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}

// parseCLFTime parses 02/Jan/2006:15:04:05 -0700 by hand.
func (z *zoneCache) parseCLFTime(b []byte) (time.Time, bool) {
	if len(b) != 26 || b[2] != '/' || b[6] != '/' || b[11] != ':' || b[14] != ':' || b[17] != ':' || b[20] != ' ' {
		return time.Time{}, false
	}
	day, ok1 := num(b[0:2])
	year, ok2 := num(b[7:11])
	hour, ok3 := num(b[12:14])
	minute, ok4 := num(b[15:17])
	sec, ok5 := num(b[18:20])
	zh, ok6 := num(b[22:24])
	zm, ok7 := num(b[24:26])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) || b[21] != '+' && b[21] != '-' {
		return time.Time{}, false
	}
	month := 0
	for i, m := range monthNames {
		if string(b[3:6]) == m {
			month = i + 1
			break
		}
	}
	if month == 0 || day < 1 || day > daysIn(month, year) || hour > 23 || minute > 59 || sec > 60 || zh > 23 || zm > 59 {
		return time.Time{}, false
	}
	offset := (zh*60 + zm) * 60
	if b[21] == '-' {
		offset = -offset
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, 0, z.location(offset)), true
}

// location returns the zone of an offset east of UTC in seconds: UTC
// for 0.
func (z *zoneCache) location(offset int) *time.Location {
	if z.loc == nil || z.offset != offset {
		z.offset, z.loc = offset, time.UTC
		if offset != 0 {
			z.loc = time.FixedZone("", offset)
		}
	}
	return z.loc
}

var monthDays = [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

func daysIn(month, year int) int {
	if month == 2 && (year%4 != 0 || year%100 == 0 && year%400 != 0) {
		return 28
	}
	return monthDays[month]
}

func num(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
