package accesslog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// detectLines is how many non-empty lines detection looks at.
const detectLines = 5

// maxHeld bounds the lines (and runs of over-long lines) detection holds.
const maxHeld = 64

// held is a line read ahead by detection: a copy of a non-empty line, or
// a run of over-long lines (text nil).
type held struct {
	line int64
	text []byte
	long int64 // how many over-long lines from line on
}

// detect reads the first non-empty lines, holding them for readLine: a
// first line that is a JSON object is JSON, one that parses as common or
// combined is that (combined only if every line sampled is), one whose
// comma-separated cells include the time field's name is a CSV header.
// Sampled lines that match no format are ignored (they are skipped and
// reported when read), and so are over-long lines; lines of two formats,
// or a first line that is both a CSV header and a log line, are refused.
func (rd *Reader) detect() (Format, error) {
	d := detector{f: rd.fields}
	longs := 0
	for d.n < detectLines && len(rd.held) < maxHeld {
		line, long, ok := rd.rawLine()
		if !ok {
			break
		}
		if long {
			longs++
			if k := len(rd.held) - 1; k >= 0 && rd.held[k].long > 0 && rd.held[k].line+rd.held[k].long == rd.read {
				rd.held[k].long++
			} else {
				rd.held = append(rd.held, held{line: rd.read, long: 1})
			}
			continue
		}
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) == 0 {
			continue
		}
		rd.held = append(rd.held, held{line: rd.read, text: bytes.Clone(line)})
		if f, err := d.add(trimmed, rd.read); f != Auto || err != nil {
			return f, err
		}
	}
	switch {
	case d.got == Combined && d.common:
		return Common, nil
	case d.got != Auto:
		return d.got, nil
	case rd.err != nil:
		return Auto, fmt.Errorf("accesslog: reading: %w", rd.err)
	case d.n > 0:
		return Auto, fmt.Errorf("accesslog: cannot detect the format: none of the first %d non-empty lines is common, combined, JSON or a CSV header naming %q", d.n, d.f.Time)
	case rd.gz != nil && rd.gz.broken != nil:
		return Auto, fmt.Errorf("accesslog: cannot detect the format: %s", rd.gz.brokenReason(rd.read))
	case longs > 0:
		return Auto, fmt.Errorf("accesslog: cannot detect the format: every line is longer than %d bytes", MaxLineBytes)
	}
	return Auto, ErrEmpty
}

// detector classifies the sampled lines.
type detector struct {
	f      FieldNames
	got    Format // the format of the lines so far, Combined standing for both
	common bool   // a line was common, not combined
	n      int    // non-empty lines sampled
}

// add samples a non-empty line, trimmed; it returns CSV when the line is
// a CSV header, Auto otherwise, or an error when the formats conflict.
func (d *detector) add(line []byte, lineNo int64) (Format, error) {
	d.n++
	var this Format
	isCSV := false
	if d.n == 1 {
		if cells, _, reason := splitCSV(line, nil, nil); reason == "" && len(cells) > 1 {
			for _, c := range cells {
				isCSV = isCSV || strings.TrimSpace(string(c)) == d.f.Time
			}
		}
	}
	if line[0] == '{' && json.Valid(line) {
		this = JSON
	} else if l, reason := splitCLF(line); reason == "" {
		var z zoneCache
		if _, ok := z.parseCLFTime(l.time); ok {
			this = Combined
			d.common = d.common || !l.combined
		}
	}
	switch {
	case isCSV && this != Auto:
		return Auto, fmt.Errorf("accesslog: cannot detect the format: line %d is both a CSV header (it names the %q column) and a %v line; give the format", lineNo, d.f.Time, this)
	case isCSV:
		return CSV, nil
	case this == Auto:
		return Auto, nil
	case d.got != Auto && d.got != this:
		return Auto, fmt.Errorf("accesslog: cannot detect the format: the first lines are %v and %v (line %d); give the format", d.got, this, lineNo)
	}
	d.got = this
	return Auto, nil
}
