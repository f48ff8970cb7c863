package main

import (
	"bytes"
	"os"
)

// contentWatch tells when a file's content changed: the native mode's
// policy file, and the overlay file (envoyproxy/ratelimit has no such
// file, so no watch of theirs to follow). last is the content seen last.
// A file that cannot be read is no change: it is read again at the next
// poll.
type contentWatch struct {
	path string
	last []byte
}

func newContentWatch(path string) *contentWatch {
	w := &contentWatch{path: path}
	w.last, _ = os.ReadFile(path)
	return w
}

func (w *contentWatch) changed() bool {
	now, err := os.ReadFile(w.path)
	if err != nil || bytes.Equal(now, w.last) {
		return false
	}
	w.last = now
	return true
}
