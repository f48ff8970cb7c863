package accesslog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// jsonState reads JSON lines.
type jsonState struct {
	obj map[string]json.RawMessage
}

func (rd *Reader) parseJSON(line []byte, rec *Record) string {
	clear(rd.js.obj)
	if err := json.Unmarshal(line, &rd.js.obj); err != nil {
		return "not a JSON object: " + err.Error()
	}
	get := func(name string) ([]byte, bool, string) {
		raw, ok := rd.js.obj[name]
		if !ok {
			return nil, false, ""
		}
		return jsonValue(name, raw)
	}
	return rd.fill(rec, get)
}

// jsonValue returns a JSON string's contents or a number's text; isStr
// tells which; null is absent.
func jsonValue(name string, raw json.RawMessage) (v []byte, isStr bool, reason string) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return nil, false, ""
	case raw[0] == '"':
		if bytes.IndexByte(raw, '\\') < 0 {
			return raw[1 : len(raw)-1], true, ""
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, false, fmt.Sprintf("field %q: %v", name, err)
		}
		return []byte(s), true, ""
	case raw[0] == '-' || isDigit(raw[0]):
		return raw, false, ""
	}
	return nil, false, fmt.Sprintf("field %q is %s, not a string or a number", name, truncate(raw))
}

// fill makes a Record from the named values of a JSON or CSV line.
func (rd *Reader) fill(rec *Record, get func(name string) (v []byte, isStr bool, reason string)) string {
	f := &rd.fields
	tv, tstr, reason := get(f.Time)
	if reason != "" {
		return reason
	}
	if tv == nil {
		return fmt.Sprintf("no %q field", f.Time)
	}
	t, ok := rd.parseTimeValue(tv, tstr)
	if !ok {
		return fmt.Sprintf("time %q is not RFC 3339, [02/Jan/2006:15:04:05 -0700] or Unix seconds or milliseconds", truncate(tv))
	}
	var key string
	if name := rd.keyField; name != "" {
		kv, _, reason := get(name)
		if reason != "" {
			return reason
		}
		key, reason = rd.valueKey(fmt.Sprintf("field %q", name), kv)
		if reason != "" {
			return reason
		}
	} else {
		kv, _, reason := get(f.Client)
		if reason != "" {
			return reason
		}
		if kv == nil {
			return fmt.Sprintf("no %q field (the client address)", f.Client)
		}
		if key, reason = rd.clientKey(kv); reason != "" {
			return reason
		}
	}
	*rec = Record{Time: t, Key: key, Cost: 1}
	rv, _, reason := get(f.Route)
	if reason != "" {
		return reason
	}
	mv, _, reason := get(f.Method)
	if reason != "" {
		return reason
	}
	pv, _, reason := get(f.Path)
	if reason != "" {
		return reason
	}
	rec.Route, rec.Method, rec.Path = string(rv), internMethod(mv), pathOf(pv)
	cv, _, reason := get(f.Cost)
	if reason != "" {
		return reason
	}
	if cv != nil {
		c, err := strconv.ParseInt(string(cv), 10, 64)
		if err != nil || c < 1 {
			return fmt.Sprintf("cost %q is not a positive integer", truncate(cv))
		}
		rec.Cost = c
	}
	return ""
}

// unixMillisFrom is where a Unix time is taken for milliseconds rather
// than seconds: 1e11 seconds is in the year 5138.
const unixMillisFrom = 1e11

// parseTimeValue parses RFC 3339, the CLF time (with or without its
// brackets) or a Unix time in seconds or milliseconds, integer or not
// (as a JSON number or a string).
func (rd *Reader) parseTimeValue(v []byte, isStr bool) (time.Time, bool) {
	if len(v) == 0 {
		return time.Time{}, false
	}
	if isNumber(v) {
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil || math.IsInf(f, 0) || f < 0 {
			return time.Time{}, false
		}
		if f >= unixMillisFrom {
			f /= 1e3
		}
		if f >= 1e11 {
			return time.Time{}, false
		}
		sec := math.Floor(f)
		return time.Unix(int64(sec), int64(math.Round((f-sec)*1e6))*1e3).UTC(), true
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
	t, err := time.Parse(time.RFC3339Nano, string(v))
	return t, err == nil
}

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
