package accesslog

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
)

// readLine returns the next line without its line ending, its number in
// rd.line; it skips (and reports) a line longer than MaxLineBytes, and at
// the end of a broken gzip stream reports the break.
// Lines held by detection come first.
func (rd *Reader) readLine() ([]byte, bool) {
	for {
		var line []byte
		var long bool
		if len(rd.held) > 0 {
			h := &rd.held[0]
			rd.line, line, long = h.line, h.text, h.long > 0
			if h.line++; h.long <= 1 {
				rd.held = rd.held[1:]
			} else {
				h.long--
			}
			if len(rd.held) == 0 {
				rd.held = nil
			}
		} else {
			var ok bool
			if line, long, ok = rd.rawLine(); !ok {
				rd.end()
				return nil, false
			}
			rd.line = rd.read
		}
		if long {
			rd.skip(fmt.Sprintf("line longer than %d bytes", MaxLineBytes))
			continue
		}
		return line, true
	}
}

// end reports, once, a gzip stream that broke: as a skipped line, the
// one after the last complete line.
func (rd *Reader) end() {
	if rd.ended {
		return
	}
	rd.ended = true
	if rd.err == nil && rd.gz != nil && rd.gz.broken != nil {
		rd.line = rd.read + 1
		rd.skip(rd.gz.brokenReason(rd.read))
	}
}

// rawLine reads the next line of the input, counted in rd.read; long is
// true for a line longer than MaxLineBytes (read past, not returned). At
// the end of the input, or on an I/O error (rd.err), ok is false; an
// incomplete last line of a broken gzip stream is dropped.
func (rd *Reader) rawLine() (line []byte, long, ok bool) {
	if rd.err != nil {
		return nil, false, false
	}
	line, err := rd.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		rd.read++
		for err == bufio.ErrBufferFull {
			_, err = rd.br.ReadSlice('\n')
		}
		if err != nil && err != io.EOF {
			rd.err = err
		}
		return nil, true, true
	}
	if err != nil && err != io.EOF {
		rd.err = err
		return nil, false, false
	}
	if len(line) == 0 || err == io.EOF && rd.gz != nil && rd.gz.broken != nil {
		return nil, false, false
	}
	rd.read++
	line = bytes.TrimSuffix(line, []byte{'\n'})
	line = bytes.TrimSuffix(line, []byte{'\r'})
	return line, false, true
}
