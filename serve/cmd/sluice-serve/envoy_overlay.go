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

// overlayWatch is the overlay file's contentWatch, which also reports the
// file becoming unreadable (deleted, say), once, so that the reload it
// causes logs that the overlay in force is kept. The file back with the
// content last seen is no change: that content is in force.
type overlayWatch struct {
	contentWatch
	unreadable bool
}

func newOverlayWatch(path string) *overlayWatch {
	return &overlayWatch{contentWatch: *newContentWatch(path)}
}

func (w *overlayWatch) changed() bool {
	now, err := os.ReadFile(w.path)
	if err != nil {
		was := w.unreadable
		w.unreadable = true
		return !was
	}
	w.unreadable = false
	if bytes.Equal(now, w.last) {
		return false
	}
	w.last = now
	return true
}
