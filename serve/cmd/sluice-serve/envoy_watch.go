package main

import (
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice/serve/envoyratelimit/settings"
)

// runtimeWatch tells when envoyproxy/ratelimit would reload its runtime
// directory. Its goruntime loader (v0.3.0) watches with inotify, not
// recursively:
//
//   - RUNTIME_WATCH_ROOT=true (SymlinkRefresher): the directory holding
//     RUNTIME_ROOT, reloading on a Write or Create event named RUNTIME_ROOT
//     itself: a symlink swapped to a new target (ln -sfn renames a new link
//     over it), RUNTIME_ROOT created, or written if it is a file. An edit
//     of a file inside the tree does not reload.
//   - RUNTIME_WATCH_ROOT=false (DirectoryRefresher with Remove, Write,
//     Create and Chmod): the configuration directory itself, reloading when
//     one of its entries is written, created (a rename into it included),
//     removed or chmod-ed. Changes inside its subdirectories do not reload.
//     An entry renamed out of the directory raises a Rename event, on
//     which goruntime does not reload: runtimeWatch sees the entry gone
//     and reloads (a deliberate difference: the file's rules go with it).
//
// runtimeWatch polls for the same changes, by comparing what Lstat says of
// those entries between two calls of changed: it needs no inotify and no
// dependency. The directory is read again in full at every reload, as
// goruntime does.
type runtimeWatch struct {
	watchRoot bool
	root, dir string
	lastRoot  entry
	lastDir   map[string]entry
}

// entry is what Lstat says of one directory entry ("" info: absent).
type entry struct {
	info   os.FileInfo
	target string // a symlink's target
}

func newRuntimeWatch(s settings.Settings) *runtimeWatch {
	w := &runtimeWatch{watchRoot: s.RuntimeWatchRoot, root: s.RuntimeRoot, dir: s.ConfigDir()}
	w.changed()
	return w
}

// changed reports whether a change goruntime would reload on happened since
// the previous call (or newRuntimeWatch).
func (w *runtimeWatch) changed() bool {
	if w.watchRoot {
		now := lstat(w.root)
		was := w.lastRoot
		w.lastRoot = now
		return rootChanged(was, now)
	}
	now := readEntries(w.dir)
	was := w.lastDir
	w.lastDir = now
	if len(now) != len(was) {
		return true
	}
	for name, e := range now {
		old, ok := was[name]
		if !ok || entryChanged(old, e) {
			return true
		}
	}
	return false
}

func lstat(path string) entry {
	info, err := os.Lstat(path)
	if err != nil {
		return entry{}
	}
	e := entry{info: info}
	if info.Mode()&os.ModeSymlink != 0 {
		e.target, _ = os.Readlink(path)
	}
	return e
}

// readEntries lstats the entries of dir; nil if dir cannot be read.
func readEntries(dir string) map[string]entry {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	m := make(map[string]entry, len(des))
	for _, de := range des {
		if e := lstat(filepath.Join(dir, de.Name())); e.info != nil {
			m[de.Name()] = e
		}
	}
	return m
}

// rootChanged: a Create or Write event on RUNTIME_ROOT happened between was
// and now. A plain directory's own mtime (changed by the files added in
// it) raises no event in the watch of its parent.
func rootChanged(was, now entry) bool {
	switch {
	case was.info == nil || now.info == nil:
		return now.info != nil // created (a removal raises no Create)
	case !os.SameFile(was.info, now.info) || was.target != now.target:
		return true
	}
	return now.info.Mode().IsRegular() && written(was.info, now.info)
}

// entryChanged: a Create (a new inode under the name), Chmod or Write
// event happened to an entry of the watched directory. Of the Chmod
// events (inotify's IN_ATTRIB) it sees those that change the mode or the
// owner, which can change what loads; not a chmod to the mode the file
// has, on which goruntime reloads the same files.
func entryChanged(was, now entry) bool {
	switch {
	case !os.SameFile(was.info, now.info) || was.target != now.target:
		return true
	case was.info.Mode() != now.info.Mode():
		return true
	}
	wasUID, wasGID, _ := owner(was.info)
	nowUID, nowGID, _ := owner(now.info)
	if wasUID != nowUID || wasGID != nowGID {
		return true
	}
	return !now.info.IsDir() && written(was.info, now.info)
}

func written(was, now os.FileInfo) bool {
	return !was.ModTime().Equal(now.ModTime()) || was.Size() != now.Size()
}

// pollRuntime calls reload each time w reports a change, checking every
// interval, until the returned func is called (which waits for a reload
// in progress).
func pollRuntime(w interface{ changed() bool }, interval time.Duration, reload func()) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			select {
			case <-quit:
				return
			case <-ticker.C:
			}
			if w.changed() {
				reload()
			}
		}
	}()
	return func() { close(quit); <-done }
}
