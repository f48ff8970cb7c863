package accesslog

import (
	"bytes"
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
// commas and doubled quotes, not line breaks); cells share buf. Spaces
// and tabs around a cell are dropped, those inside quotes kept.
func splitCSV(line []byte, cells [][]byte, buf []byte) ([][]byte, []byte, string) {
	cells, buf = cells[:0], buf[:0]
	for {
		line = trimBlank(line, true)
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
			line = trimBlank(line[i:], true)
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
			return append(cells, trimBlank(line, false)), buf, ""
		}
		if bytes.IndexByte(line[:i], '"') >= 0 {
			return cells, buf, `a '"' inside an unquoted cell`
		}
		cells = append(cells, trimBlank(line[:i], false))
		line = line[i+1:]
	}
}

// trimBlank drops the spaces and tabs that start b (left) or end it.
func trimBlank(b []byte, left bool) []byte {
	if left {
		for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
			b = b[1:]
		}
		return b
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
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
	needs := [][2]string{{rd.fields.Time, "the time"}}
	for _, spec := range rd.keySpecs {
		if spec.field == "" {
			needs = append(needs, [2]string{rd.fields.Client, "the client address"})
		} else {
			needs = append(needs, [2]string{spec.field, "the key field"})
		}
	}
	for _, need := range needs {
		if _, ok := c.columns[need[0]]; !ok {
			return fmt.Errorf("accesslog: CSV header (line %d) has no %q column for %s (columns: %s)", rd.line, need[0], need[1], truncate(line))
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
