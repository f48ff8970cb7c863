package accesslog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// jsonState reads JSON lines: vals holds, per wanted field name, the raw
// value of the current line. A name with dots is also a path to a member
// of nested objects (see FieldNames).
type jsonState struct {
	names  []string
	vals   [][]byte
	dotted bool // a name has a dot
}

func (j *jsonState) init(names ...string) {
	for _, n := range names {
		if n != "" && !slices.Contains(j.names, n) {
			j.names = append(j.names, n)
			j.dotted = j.dotted || strings.IndexByte(n, '.') >= 0
		}
	}
	j.vals = make([][]byte, len(j.names))
}

// matchDotted sets the values of the names that key or a path into its
// value (an object) names.
func (j *jsonState) matchDotted(key, val []byte) {
	for n, name := range j.names {
		if string(key) == name {
			j.vals[n] = val
		} else if v := lookup(key, val, name); v != nil {
			j.vals[n] = v
		}
	}
}

// lookup returns the value path names in the member key: val, when the
// path is key, a dot and a path into val, an object; nil if none.
func lookup(key, val []byte, path string) []byte {
	if len(path) <= len(key) || path[len(key)] != '.' || path[:len(key)] != string(key) || val[0] != '{' {
		return nil
	}
	path = path[len(key)+1:]
	var found []byte
	for m := (members{b: val, i: 1}); ; {
		k, v, ok := m.next()
		if !ok {
			return found
		}
		if string(k) == path {
			found = v
		} else if v := lookup(k, v, path); v != nil {
			found = v
		}
	}
}

// members iterates over the members of a valid JSON object b, from i.
type members struct {
	b []byte
	i int
}

// next returns the next member's key, unescaped, and value, or false
// after the last.
func (m *members) next() (key, val []byte, ok bool) {
	b := m.b
	i := skipSpace(b, m.i)
	if b[i] == ',' {
		i = skipSpace(b, i+1)
	}
	if b[i] == '}' {
		return nil, nil, false
	}
	kEnd := endOfString(b, i)
	key = b[i+1 : kEnd-1]
	if bytes.IndexByte(key, '\\') >= 0 {
		var k string
		_ = json.Unmarshal(b[i:kEnd], &k) // valid: the object is
		key = []byte(k)
	}
	i = skipSpace(b, skipSpace(b, kEnd)+1) // past ':'
	m.i = endOfValue(b, i)
	return key, b[i:m.i], true
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
	for m := (members{b: line, i: 1}); ; {
		key, val, ok := m.next()
		if !ok {
			break
		}
		if j.dotted {
			j.matchDotted(key, val)
			continue
		}
		for n, name := range j.names {
			if string(key) == name {
				j.vals[n] = val
			}
		}
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
	key, keys, reason := rd.recordKeys(func(spec keySpec) (string, string) {
		if spec.field != "" {
			kv, _, reason := get(spec.field)
			if reason != "" {
				return "", reason
			}
			return rd.valueKey(fmt.Sprintf("field %q", spec.field), kv)
		}
		kv, _, reason := get(f.Client)
		if reason != "" {
			return "", reason
		}
		if kv == nil {
			return "", fmt.Sprintf("no %q field (the client address)", f.Client)
		}
		return rd.clientKey(kv)
	})
	if reason != "" {
		return reason
	}
	*rec = Record{Time: t, Key: key, Keys: keys, Cost: 1}
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
