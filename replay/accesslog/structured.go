package accesslog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// jsonState reads JSON lines: vals holds, per wanted field name, the raw
// value of the current line.
type jsonState struct {
	names []string
	vals  [][]byte
}

func (j *jsonState) init(names ...string) {
	for _, n := range names {
		if n != "" && !slices.Contains(j.names, n) {
			j.names = append(j.names, n)
		}
	}
	j.vals = make([][]byte, len(j.names))
}

func (rd *Reader) parseJSON(line []byte, rec *Record) string {
	j := &rd.js
	if !json.Valid(line) {
		var v any
		return "not a JSON object: " + json.Unmarshal(line, &v).Error()
	}
	line = bytes.TrimSpace(line)
	if line[0] != '{' {
		return "not a JSON object"
	}
	clear(j.vals)
	// line is valid JSON: scan its top-level members.
	i := 1
	for {
		i = skipSpace(line, i)
		if line[i] == '}' {
			break
		}
		kEnd := endOfString(line, i)
		key := line[i+1 : kEnd-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var k string
			_ = json.Unmarshal(line[i:kEnd], &k) // valid: the line is
			key = []byte(k)
		}
		i = skipSpace(line, kEnd) + 1 // past ':'
		i = skipSpace(line, i)
		vEnd := endOfValue(line, i)
		for n, name := range j.names {
			if string(key) == name {
				j.vals[n] = line[i:vEnd]
			}
		}
		i = skipSpace(line, vEnd)
		if line[i] == '}' {
			break
		}
		i++ // past ','
	}
	get := func(name string) ([]byte, bool, string) {
		n := slices.Index(j.names, name)
		if n < 0 || j.vals[n] == nil {
			return nil, false, ""
		}
		return jsonValue(name, j.vals[n])
	}
	return rd.fill(rec, get)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// endOfString returns the index after the JSON string that starts at b[i].
func endOfString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// endOfValue returns the index after the valid JSON value at b[i].
func endOfValue(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			i = endOfString(b, i)
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return i
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
		return fmt.Sprintf("time %q is not RFC 3339, 2006-01-02 15:04:05, [02/Jan/2006:15:04:05 -0700] or a Unix time", truncate(tv))
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
