package accesslog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// csvState reads CSV lines: columns maps a field name to its column.
type csvState struct {
	columns map[string]int
	cells   [][]byte
	buf     []byte // unquoted cells
}

// splitCSV splits one line of RFC 4180 CSV (a quoted cell may hold
// commas and doubled quotes, not line breaks); cells share buf.
func splitCSV(line []byte, cells [][]byte, buf []byte) ([][]byte, []byte, string) {
	cells, buf = cells[:0], buf[:0]
	for {
		if len(line) > 0 && line[0] == '"' {
			start := len(buf)
			i := 1
			for {
				j := bytes.IndexByte(line[i:], '"')
				if j < 0 {
					return cells, buf, "unterminated quoted cell"
				}
				buf = append(buf, line[i:i+j]...)
				i += j + 1
				if i < len(line) && line[i] == '"' {
					buf = append(buf, '"')
					i++
					continue
				}
				break
			}
			cells = append(cells, buf[start:len(buf):len(buf)])
			line = line[i:]
			if len(line) == 0 {
				return cells, buf, ""
			}
			if line[0] != ',' {
				return cells, buf, "text after a quoted cell"
			}
			line = line[1:]
			continue
		}
		i := bytes.IndexByte(line, ',')
		if i < 0 {
			if bytes.IndexByte(line, '"') >= 0 {
				return cells, buf, `a '"' inside an unquoted cell`
			}
			return append(cells, line), buf, ""
		}
		if bytes.IndexByte(line[:i], '"') >= 0 {
			return cells, buf, `a '"' inside an unquoted cell`
		}
		cells = append(cells, line[:i])
		line = line[i+1:]
	}
}

// readCSVHeader reads the header row (the first non-empty line) and
// checks that it names the time and key columns.
func (rd *Reader) readCSVHeader() error {
	var line []byte
	for {
		l, ok := rd.readLine()
		if !ok {
			if rd.err != nil {
				return fmt.Errorf("accesslog: reading the CSV header: %w", rd.err)
			}
			return fmt.Errorf("accesslog: CSV input without a header row")
		}
		if len(bytes.TrimSpace(l)) > 0 {
			line = l
			break
		}
	}
	cells, _, reason := splitCSV(line, nil, nil)
	if reason != "" {
		return fmt.Errorf("accesslog: CSV header (line %d): %s", rd.line, reason)
	}
	c := &rd.csv
	c.columns = make(map[string]int, len(cells))
	for i, cell := range cells {
		name := strings.TrimSpace(string(cell))
		if _, dup := c.columns[name]; dup {
			return fmt.Errorf("accesslog: CSV header (line %d): column %q twice", rd.line, name)
		}
		c.columns[name] = i
	}
	keyCol := rd.fields.Client
	if rd.opts.KeyFrom != "" && rd.opts.KeyFrom != "client" {
		keyCol = rd.opts.KeyFrom
	}
	for _, need := range []string{rd.fields.Time, keyCol} {
		if _, ok := c.columns[need]; !ok {
			return fmt.Errorf("accesslog: CSV header (line %d) has no %q column (columns: %s)", rd.line, need, truncate(line))
		}
	}
	return nil
}

func (rd *Reader) parseCSV(line []byte, rec *Record) string {
	c := &rd.csv
	var reason string
	c.cells, c.buf, reason = splitCSV(line, c.cells, c.buf)
	if reason != "" {
		return "CSV: " + reason
	}
	if len(c.cells) != len(c.columns) {
		return fmt.Sprintf("%d cells, the header has %d", len(c.cells), len(c.columns))
	}
	return rd.fill(rec, func(name string) ([]byte, bool, string) {
		i, ok := c.columns[name]
		if !ok || len(c.cells[i]) == 0 {
			return nil, false, ""
		}
		return c.cells[i], true, ""
	})
}

// detectLines is how many non-empty lines detection looks at.
const detectLines = 5

// detect reads (without consuming) the first non-empty lines: a first
// line that is a JSON object is JSON, one that parses as common or
// combined is that (combined only if every line sampled is), one whose
// comma-separated cells include the time field's name is a CSV header.
// Sampled lines that match no format are ignored (they are skipped and
// reported when read); lines of two formats, or a first line that is
// both a CSV header and a log line, are refused.
func detect(br interface{ Peek(int) ([]byte, error) }, f FieldNames) (Format, error) {
	buf, err := br.Peek(MaxLineBytes)
	atEOF := err != nil
	var got Format
	common, n := false, 0
	for lineNo := 1; len(buf) > 0 && n < detectLines; lineNo++ {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 && !atEOF {
			break // cut by the peek
		}
		line := buf
		if i >= 0 {
			line, buf = buf[:i], buf[i+1:]
		} else {
			buf = nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		n++
		var this Format
		isCSV := false
		if n == 1 {
			if cells, _, reason := splitCSV(line, nil, nil); reason == "" && len(cells) > 1 {
				for _, c := range cells {
					isCSV = isCSV || strings.TrimSpace(string(c)) == f.Time
				}
			}
		}
		if line[0] == '{' && json.Valid(line) {
			this = JSON
		} else if l, reason := splitCLF(line); reason == "" {
			var z zoneCache
			if _, ok := z.parseCLFTime(l.time); ok {
				this = Combined
				common = common || !l.combined
			}
		}
		switch {
		case isCSV && this != Auto:
			return Auto, fmt.Errorf("accesslog: cannot detect the format: line %d is both a CSV header (it names the %q column) and a %v line; give the format", lineNo, f.Time, this)
		case isCSV:
			return CSV, nil
		case this == Auto:
			continue
		case got != Auto && got != this:
			return Auto, fmt.Errorf("accesslog: cannot detect the format: the first lines are %v and %v (line %d); give the format", got, this, lineNo)
		}
		got = this
	}
	switch {
	case got == Combined && common:
		return Common, nil
	case got != Auto:
		return got, nil
	case n == 0 && atEOF:
		return Auto, ErrEmpty
	}
	return Auto, fmt.Errorf("accesslog: cannot detect the format: none of the first %d non-empty lines is common, combined, JSON or a CSV header naming %q", n, f.Time)
}
