package accesslog

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
)

// errSource is the input as given, remembering the last error other than
// io.EOF it returned: an I/O error, as opposed to a format error of the
// gzip stream read from it.
type errSource struct {
	r   io.Reader
	err error
}

func (s *errSource) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}

// gzipSource decompresses the input. A format error of the stream
// (truncated, corrupt, or followed by garbage) ends it as io.EOF, the
// error kept in broken; an I/O error of the input is returned as it is.
type gzipSource struct {
	zr     *gzip.Reader
	in     *errSource
	broken error
}

func (g *gzipSource) Read(p []byte) (int, error) {
	if g.broken != nil {
		return 0, io.EOF
	}
	n, err := g.zr.Read(p)
	if err == nil || err == io.EOF {
		return n, err
	}
	if g.in.err != nil {
		return n, g.in.err
	}
	g.broken = err
	return n, io.EOF
}

// brokenReason describes a stream that broke after line n.
func (g *gzipSource) brokenReason(n int64) string {
	if errors.Is(g.broken, io.ErrUnexpectedEOF) {
		return fmt.Sprintf("gzip stream truncated after line %d: %v", n, g.broken)
	}
	return fmt.Sprintf("gzip stream corrupt after line %d: %v", n, g.broken)
}
