package accesslog

import (
	"bytes"
	"time"
)

// parseTimeValue parses a time field as FieldNames.Time documents: a
// string or a number (isStr false), which can only be a Unix time.
func (rd *Reader) parseTimeValue(v []byte, isStr bool) (time.Time, bool) {
	if len(v) == 0 {
		return time.Time{}, false
	}
	if isNumber(v) {
		return parseUnix(v)
	}
	if !isStr {
		return time.Time{}, false
	}
	if len(v) == 28 && v[0] == '[' && v[27] == ']' {
		v = v[1:27]
	}
	if len(v) == 26 && v[2] == '/' {
		return rd.zones.parseCLFTime(v)
	}
	return rd.zones.parseISOTime(v)
}

// parseISOTime parses 2006-01-02T15:04:05 with a 'T', 't' or space
// between date and time, then optional fractional seconds after a '.' or
// ',' (nanoseconds kept, further digits dropped), then an optional zone:
// 'Z', 'z', "UTC", or an offset ±07:00, ±0700 or ±07, after an optional
// space. Without a zone the time is UTC.
func (z *zoneCache) parseISOTime(b []byte) (time.Time, bool) {
	if len(b) < 19 || b[4] != '-' || b[7] != '-' || b[13] != ':' || b[16] != ':' ||
		b[10] != 'T' && b[10] != 't' && b[10] != ' ' {
		return time.Time{}, false
	}
	year, ok1 := num(b[0:4])
	month, ok2 := num(b[5:7])
	day, ok3 := num(b[8:10])
	hour, ok4 := num(b[11:13])
	minute, ok5 := num(b[14:16])
	sec, ok6 := num(b[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || month < 1 || month > 12 ||
		day < 1 || day > daysIn(month, year) || hour > 23 || minute > 59 || sec > 60 {
		return time.Time{}, false
	}
	rest, nsec := b[19:], 0
	if len(rest) > 0 && (rest[0] == '.' || rest[0] == ',') {
		i := 1
		for ; i < len(rest) && isDigit(rest[i]); i++ {
			if i <= 9 {
				nsec = nsec*10 + int(rest[i]-'0')
			}
		}
		if i == 1 {
			return time.Time{}, false
		}
		for d := i; d <= 9; d++ {
			nsec *= 10
		}
		rest = rest[i:]
	}
	offset, ok := zoneOffset(rest)
	if !ok {
		return time.Time{}, false
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, nsec, z.location(offset)), true
}

// zoneOffset parses what may follow a time: nothing, or a zone after an
// optional space (see parseISOTime); the offset is in seconds east.
func zoneOffset(b []byte) (int, bool) {
	if len(b) > 1 && b[0] == ' ' {
		b = b[1:]
	}
	switch {
	case len(b) == 0 || string(b) == "Z" || string(b) == "z" || string(b) == "UTC":
		return 0, true
	case b[0] != '+' && b[0] != '-':
		return 0, false
	}
	var hh, mm int
	ok1, ok2 := false, true
	switch {
	case len(b) == 3:
		hh, ok1 = num(b[1:3])
	case len(b) == 5:
		hh, ok1 = num(b[1:3])
		mm, ok2 = num(b[3:5])
	case len(b) == 6 && b[3] == ':':
		hh, ok1 = num(b[1:3])
		mm, ok2 = num(b[4:6])
	}
	if !ok1 || !ok2 || hh > 23 || mm > 59 {
		return 0, false
	}
	if b[0] == '-' {
		return -(hh*60 + mm) * 60, true
	}
	return (hh*60 + mm) * 60, true
}

// Where the unit of a Unix time changes, by its integer part: seconds
// below 1e11 (the year 5138), then milliseconds, microseconds, and
// nanoseconds from 1e17, each unit so read for times from 3 March 1973.
const (
	unixMillisFrom = 1e11
	unixMicrosFrom = 1e14
	unixNanosFrom  = 1e17
)

// parseUnix parses a Unix time (digits, at most one '.' after the first),
// its unit told by its magnitude, exactly (to the nanosecond).
func parseUnix(v []byte) (time.Time, bool) {
	whole, frac, _ := bytes.Cut(v, []byte{'.'})
	var n uint64
	for _, c := range whole {
		d := uint64(c - '0')
		if n > (1<<64-1-d)/10 {
			return time.Time{}, false // over 2^64 - 1
		}
		n = n*10 + d
	}
	var perSec uint64 = 1 // units in a second
	switch {
	case n >= unixNanosFrom:
		perSec = 1e9
	case n >= unixMicrosFrom:
		perSec = 1e6
	case n >= unixMillisFrom:
		perSec = 1e3
	}
	nsPerUnit := 1e9 / perSec
	var f, scale uint64 = 0, 1 // the fraction of a unit: f / scale
	for i := 0; i < len(frac) && i < 9; i++ {
		f, scale = f*10+uint64(frac[i]-'0'), scale*10
	}
	nsec := n%perSec*nsPerUnit + f*nsPerUnit/scale
	return time.Unix(int64(n/perSec), int64(nsec)).UTC(), true
}

// isNumber reports whether v is digits with at most one '.' after the
// first.
func isNumber(v []byte) bool {
	dot := false
	for i, c := range v {
		switch {
		case isDigit(c):
		case c == '.' && !dot && i > 0:
			dot = true
		default:
			return false
		}
	}
	return true
}
