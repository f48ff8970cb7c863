package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// readFile reads one file of the walk (a variable for the tests).
var readFile = os.ReadFile

// Runtime is envoyproxy/ratelimit's runtime directory, as its RUNTIME_*
// variables name it.
type Runtime struct {
	Root           string // RUNTIME_ROOT
	Subdirectory   string // RUNTIME_SUBDIRECTORY
	AppDirectory   string // RUNTIME_APPDIRECTORY
	WatchRoot      bool   // RUNTIME_WATCH_ROOT
	IgnoreDotFiles bool   // RUNTIME_IGNOREDOTFILES
}

// Dir is the configuration directory, Root/Subdirectory/AppDirectory.
func (r Runtime) Dir() string {
	return filepath.Join(r.Root, r.Subdirectory, r.AppDirectory)
}

// TheirsLoadsNothing returns why envoyproxy/ratelimit would load none of
// the configuration directory's files (and, but for a sibling
// AppDirectory.* file, answer every request OK), or "" when it loads its
// set (see [Runtime.Read]). Its provider (src/provider/file_provider.go)
// builds a goruntime loader on Root and Subdirectory with
// RUNTIME_WATCH_ROOT, on Root/Subdirectory and AppDirectory without:
// goruntime's New2 makes a loader that loads nothing when either is
// empty, and its walk skips its own root when that is a dot directory
// under RUNTIME_IGNOREDOTFILES, and does not follow a symbolic link to a
// directory (it fails to read it as a file), its root included.
func (r Runtime) TheirsLoadsNothing() string {
	base, leaf, leafName := r.Root, r.Subdirectory, "RUNTIME_SUBDIRECTORY"
	if !r.WatchRoot {
		base, leaf, leafName = filepath.Join(r.Root, r.Subdirectory), r.AppDirectory, "RUNTIME_APPDIRECTORY"
	}
	switch {
	case base == "" && r.WatchRoot:
		return "RUNTIME_ROOT is empty: goruntime makes a loader that loads nothing"
	case base == "":
		return "RUNTIME_ROOT and RUNTIME_SUBDIRECTORY are empty: goruntime makes a loader that loads nothing"
	case leaf == "":
		return leafName + " is empty: goruntime makes a loader that loads nothing"
	}
	walkRoot := filepath.Join(base, leaf)
	if r.IgnoreDotFiles && strings.HasPrefix(filepath.Base(walkRoot), ".") {
		return "with RUNTIME_IGNOREDOTFILES=true, goruntime skips the directory it walks, " + walkRoot + ", for its name starts with '.'"
	}
	if isLinkToDir(walkRoot) {
		return "the directory goruntime walks, " + walkRoot + ", is a symbolic link, which its walk does not follow"
	}
	if !r.WatchRoot {
		return ""
	}
	if isLinkToDir(r.Dir()) {
		return "the configuration directory is a symbolic link, which goruntime's walk does not follow"
	}
	switch {
	case r.AppDirectory == "":
		return "RUNTIME_APPDIRECTORY is empty: envoyproxy/ratelimit keeps only the runtime keys that start with '.'"
	case strings.Contains(r.AppDirectory, "/"):
		return "RUNTIME_APPDIRECTORY holds a '/': envoyproxy/ratelimit keeps the runtime keys that start with it and '.', and goruntime's keys have '.' where the paths have '/'"
	case r.IgnoreDotFiles && strings.HasPrefix(r.AppDirectory, "."):
		return "with RUNTIME_IGNOREDOTFILES=true, goruntime skips every file and directory whose name starts with '.', and RUNTIME_APPDIRECTORY does"
	}
	return ""
}

// Read returns the configuration files of the runtime, the set
// envoyproxy/ratelimit loads:
//
//   - RUNTIME_WATCH_ROOT=true: every file under Root/Subdirectory whose
//     goruntime key (its path under that directory, '/' made '.') starts
//     with AppDirectory and '.': the files under Root/Subdirectory/
//     AppDirectory, and also its siblings named AppDirectory.* (such as
//     config.extra.yaml, or the files under config.old/). Without the
//     directory AppDirectory, the siblings alone are read; without either,
//     the set is refused.
//   - RUNTIME_WATCH_ROOT=false: every file under Root/Subdirectory/
//     AppDirectory.
//
// Where TheirsLoadsNothing is not "", Read reads the files under Dir
// instead, as in the second case: a runtime that loads no rule would
// allow every request.
//
// The walk is [ReadDir]'s. Two files of one goruntime key (config/a.b.yaml
// and config/a/b.yaml, or config.a.yaml beside config/a.yaml) are an
// error naming both: goruntime keeps one of them and drops the other.
func (r Runtime) Read() ([]File, error) {
	if !r.WatchRoot || r.TheirsLoadsNothing() != "" {
		return ReadDir(r.Dir(), r.IgnoreDotFiles)
	}
	missing := isDir(r.Dir())
	if missing != nil && !errors.Is(missing, fs.ErrNotExist) {
		return nil, missing
	}
	prefix := r.AppDirectory + "."
	files, err := walk(filepath.Join(r.Root, r.Subdirectory), r.IgnoreDotFiles,
		func(key string) bool {
			key += "."
			return strings.HasPrefix(key, prefix) || strings.HasPrefix(prefix, key)
		},
		func(key string) bool { return strings.HasPrefix(key, prefix) })
	if err == nil && len(files) == 0 && missing != nil {
		return nil, missing // theirs would load nothing and allow every request
	}
	return files, err
}

// ReadDir returns every file under dir, subdirectories included, in
// lexical order of their paths, as lyft/goruntime's loader walks the
// runtime directory for envoyproxy/ratelimit: whatever their names (not
// only .yaml); symbolic links to files are read, while links to
// directories and dangling links are skipped (it does not follow them);
// with ignoreDotFiles (RUNTIME_IGNOREDOTFILES) files and directories whose
// names start with '.' are skipped, which is what keeps a Kubernetes
// ConfigMap volume's "..2024_01_01_..." directory from being read twice.
// dir itself is read whatever its name, and followed when it is a
// symbolic link (goruntime would read nothing). Each File's Path is dir
// joined with the file's path under it.
//
// Where goruntime logs a file it cannot read and loads the others,
// ReadDir returns an error: a configuration missing a file is not loaded.
// So are two files of one goruntime key (a.b.yaml and a/b.yaml), of
// which goruntime loads one.
func ReadDir(dir string, ignoreDotFiles bool) ([]File, error) {
	if err := isDir(dir); err != nil {
		return nil, err
	}
	all := func(string) bool { return true }
	return walk(dir, ignoreDotFiles, all, all)
}

func isLinkToDir(path string) bool {
	info, err := os.Lstat(path)
	if err != nil || info.Mode()&fs.ModeSymlink == 0 {
		return false
	}
	target, err := os.Stat(path)
	return err == nil && target.IsDir()
}

func isDir(dir string) error {
	info, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if !info.IsDir() {
		return fmt.Errorf("config: %s is not a directory", dir)
	}
	return nil
}

// walk reads the files under dir as ReadDir describes, entering the
// directories whose goruntime key (the path under dir, '/' made '.')
// enter accepts and reading the files whose key keep accepts.
func walk(dir string, ignoreDotFiles bool, enter, keep func(key string) bool) ([]File, error) {
	root := dir
	if isLinkToDir(dir) {
		target, err := filepath.EvalSymlinks(dir)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		root = target
	}
	var files []File
	byKey := map[string]string{} // goruntime key -> path
	err := filepath.WalkDir(root, func(walked string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		if walked == root {
			return nil
		}
		rel, err := filepath.Rel(root, walked)
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		path := filepath.Join(dir, rel)
		key := strings.ReplaceAll(filepath.ToSlash(rel), "/", ".")
		dot := ignoreDotFiles && strings.HasPrefix(d.Name(), ".")
		if d.IsDir() {
			if dot || !enter(key) {
				return filepath.SkipDir
			}
			return nil
		}
		if dot || !keep(key) {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := os.Stat(path)
			if err != nil || !target.Mode().IsRegular() {
				return nil // as goruntime: a link it cannot read as a file
			}
		} else if !d.Type().IsRegular() {
			return nil
		}
		if first, ok := byKey[key]; ok {
			return fmt.Errorf("config: %s and %s are one runtime key, %q, of which envoyproxy/ratelimit loads only one: rename one of them", first, path, key)
		}
		byKey[key] = path
		data, err := readFile(path)
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		files = append(files, File{Path: path, Data: data})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return files, nil
}
