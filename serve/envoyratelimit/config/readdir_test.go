package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// tree writes files (path under base: content) and returns base.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	base := t.TempDir()
	for rel, content := range files {
		p := filepath.Join(base, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return base
}

// paths are the files' paths under base, '/'-separated.
func paths(t *testing.T, base string, files []File) []string {
	t.Helper()
	var out []string
	for _, f := range files {
		rel, err := filepath.Rel(base, f.Path)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

// TestRuntimeReadsTheirSet: with RUNTIME_WATCH_ROOT=true envoyproxy/
// ratelimit walks RUNTIME_ROOT/RUNTIME_SUBDIRECTORY and keeps the
// goruntime keys that start with "config.": the app directory's files,
// and its siblings config.* (files, and the files under directories so
// named); with RUNTIME_WATCH_ROOT=false the app directory's only. A file
// outside the set is not read. (goruntime v0.3.0 on this layout keeps
// the same keys.)
func TestRuntimeReadsTheirSet(t *testing.T) {
	base := tree(t, map[string]string{
		"rl/config/a.yaml":      "domain: a",
		"rl/config/sub/b.yaml":  "domain: b",
		"rl/config.extra.yaml":  "domain: extra",
		"rl/config.old/c.yaml":  "domain: old",
		"rl/config.yaml":        "domain: top",
		"rl/configx.yaml":       "domain: x",
		"rl/other/d.yaml":       "domain: d",
		"rl/other.config/e.yml": "domain: e",
	})
	readFile = func(path string) ([]byte, error) {
		if strings.Contains(path, "other") || strings.Contains(path, "configx") {
			return nil, errors.New("read outside the set")
		}
		return os.ReadFile(path)
	}
	t.Cleanup(func() { readFile = os.ReadFile })
	rt := Runtime{Root: base, Subdirectory: "rl", AppDirectory: "config", WatchRoot: true}
	if why := rt.TheirsLoadsNothing(); why != "" {
		t.Fatalf("TheirsLoadsNothing: %q", why)
	}
	files, err := rt.Read()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"rl/config/a.yaml", "rl/config/sub/b.yaml", "rl/config.extra.yaml", "rl/config.old/c.yaml", "rl/config.yaml"}
	if got := paths(t, base, files); !reflect.DeepEqual(got, want) {
		t.Fatalf("RUNTIME_WATCH_ROOT=true: %q, want %q", got, want)
	}
	rt.WatchRoot = false
	files, err = rt.Read()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := paths(t, base, files), []string{"rl/config/a.yaml", "rl/config/sub/b.yaml"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("RUNTIME_WATCH_ROOT=false: %q, want %q", got, want)
	}
}

// TestRuntimeWhereTheirsLoadsNothing: where envoyproxy/ratelimit would
// load no file at all (RUNTIME_SUBDIRECTORY unset: goruntime's New2 makes
// a nil loader; a dot directory as the walk's root under
// RUNTIME_IGNOREDOTFILES; ...), and so allow every request, Sluice says
// why and reads the app directory, RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/
// RUNTIME_APPDIRECTORY, following it when it is a symbolic link (which
// goruntime's walk does not follow: it fails to read it as a file).
func TestRuntimeWhereTheirsLoadsNothing(t *testing.T) {
	base := tree(t, map[string]string{
		"config/a.yaml":      "domain: a",
		"config.extra.yaml":  "domain: extra",
		".rl/config/b.yaml":  "domain: b",
		"rl/.cfg/c.yaml":     "domain: c",
		"rl/.cfg/.hidden":    "x",
		"rl/a/b/d.yaml":      "domain: d",
		"rl/.cfg.extra.yaml": "domain: e",
		"elsewhere/f.yaml":   "domain: f",
	})
	for link, target := range map[string]string{"rl/linked": "../elsewhere", "linked": "rl"} {
		if err := os.Symlink(target, filepath.Join(base, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		rt   Runtime
		why  string
		want []string
	}{
		{"no subdirectory", Runtime{Root: base, AppDirectory: "config", WatchRoot: true},
			"RUNTIME_SUBDIRECTORY is empty", []string{"config/a.yaml"}},
		{"a dot subdirectory", Runtime{Root: base, Subdirectory: ".rl", AppDirectory: "config", WatchRoot: true, IgnoreDotFiles: true},
			"skips the directory it walks", []string{".rl/config/b.yaml"}},
		{"a dot app directory", Runtime{Root: base, Subdirectory: "rl", AppDirectory: ".cfg", WatchRoot: true, IgnoreDotFiles: true},
			"RUNTIME_APPDIRECTORY does", []string{"rl/.cfg/c.yaml"}},
		{"a dot app directory, watching it", Runtime{Root: base, Subdirectory: "rl", AppDirectory: ".cfg", IgnoreDotFiles: true},
			"skips the directory it walks", []string{"rl/.cfg/c.yaml"}},
		{"an app directory of two levels", Runtime{Root: base, Subdirectory: "rl", AppDirectory: "a/b", WatchRoot: true},
			"holds a '/'", []string{"rl/a/b/d.yaml"}},
		{"no app directory, watching it", Runtime{Root: base, Subdirectory: "rl"},
			"RUNTIME_APPDIRECTORY is empty", nil},
		{"a linked app directory", Runtime{Root: base, Subdirectory: "rl", AppDirectory: "linked", WatchRoot: true},
			"the configuration directory is a symbolic link", []string{"rl/linked/f.yaml"}},
		{"a linked app directory, watching it", Runtime{Root: base, Subdirectory: "rl", AppDirectory: "linked"},
			"is a symbolic link", []string{"rl/linked/f.yaml"}},
		{"a linked subdirectory", Runtime{Root: base, Subdirectory: "linked", AppDirectory: ".cfg", WatchRoot: true},
			"is a symbolic link", []string{"linked/.cfg/.hidden", "linked/.cfg/c.yaml"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if why := c.rt.TheirsLoadsNothing(); !strings.Contains(why, c.why) {
				t.Fatalf("TheirsLoadsNothing %q, want it to say %q", why, c.why)
			}
			files, err := c.rt.Read()
			if c.want == nil {
				// RUNTIME_ROOT/rl holds a, .cfg and the dot file: all read.
				if err != nil || len(files) != 4 {
					t.Fatalf("%d files, %v", len(files), err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := paths(t, base, files); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("%q, want %q", got, c.want)
			}
		})
	}
	if why := (Runtime{Root: base, Subdirectory: "rl", AppDirectory: "config", WatchRoot: true, IgnoreDotFiles: true}).TheirsLoadsNothing(); why != "" {
		t.Fatalf("a plain layout: %q", why)
	}
}

// TestRuntimeRefusesTwoFilesOfOneKey: goruntime names a file by its path
// with '.' for '/', so config/a.b.yaml and config/a/b.yaml (or
// config.a.yaml beside config/a.yaml) are one key, and it keeps the one
// it walks last; Sluice refuses the set, naming both.
func TestRuntimeRefusesTwoFilesOfOneKey(t *testing.T) {
	for _, c := range []struct {
		name      string
		files     []string
		watchRoot bool
	}{
		{"in the app directory", []string{"rl/config/a.b.yaml", "rl/config/a/b.yaml"}, false},
		{"in the app directory, watching the root", []string{"rl/config/a.b.yaml", "rl/config/a/b.yaml"}, true},
		{"a sibling", []string{"rl/config.a.yaml", "rl/config/a.yaml"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := map[string]string{}
			for _, f := range c.files {
				m[f] = "domain: " + f
			}
			base := tree(t, m)
			_, err := Runtime{Root: base, Subdirectory: "rl", AppDirectory: "config", WatchRoot: c.watchRoot}.Read()
			if err == nil {
				t.Fatal("read")
			}
			for _, f := range c.files {
				if !strings.Contains(err.Error(), filepath.Join(base, filepath.FromSlash(f))) {
					t.Fatalf("error %q does not name %s", err, f)
				}
			}
		})
	}
}

// TestRuntimeRefusesAFileItCannotRead: goruntime logs a file it cannot
// read and loads the others; Sluice refuses the set (a reload keeps the
// one in force, a start fails), naming the file.
func TestRuntimeRefusesAFileItCannotRead(t *testing.T) {
	base := tree(t, map[string]string{"rl/config/a.yaml": "domain: a", "rl/config/b.yaml": "domain: b"})
	readFile = func(path string) ([]byte, error) {
		if filepath.Base(path) == "b.yaml" {
			return nil, &os.PathError{Op: "open", Path: path, Err: os.ErrPermission}
		}
		return os.ReadFile(path)
	}
	t.Cleanup(func() { readFile = os.ReadFile })
	for _, watchRoot := range []bool{true, false} {
		_, err := Runtime{Root: base, Subdirectory: "rl", AppDirectory: "config", WatchRoot: watchRoot}.Read()
		if err == nil || !strings.Contains(err.Error(), filepath.Join(base, "rl", "config", "b.yaml")) || !errors.Is(err, os.ErrPermission) {
			t.Fatalf("watch root %v: %v, want the file's permission error", watchRoot, err)
		}
	}
}

// TestRuntimeRefusesAMissingAppDirectory: where theirs loads an empty
// configuration (RUNTIME_WATCH_ROOT=true: goruntime logs the walk's error,
// or finds no file of the set, and loads nothing), Sluice refuses: at
// start it exits, on a reload it keeps the set in force.
func TestRuntimeRefusesAMissingAppDirectory(t *testing.T) {
	base := tree(t, map[string]string{"rl/configx.yaml": "domain: x", "rl/other/a.yaml": "domain: a", "other/config/a.yaml": "domain: a"})
	for _, rt := range []Runtime{
		{Root: base, Subdirectory: "rl", AppDirectory: "config", WatchRoot: true},
		{Root: base, Subdirectory: "nothere", AppDirectory: "config", WatchRoot: true},
		{Root: base, Subdirectory: "rl", AppDirectory: "config"},
	} {
		if files, err := rt.Read(); err == nil || !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%+v: %d files, %v; want the directory's absence", rt, len(files), err)
		}
	}
}

// TestRuntimeWithoutAppDirectoryReadsTheSiblings: with
// RUNTIME_WATCH_ROOT=true and no app directory, theirs loads the sibling
// files named AppDirectory.* (goruntime walks Root/Subdirectory), and so
// does Sluice; without RUNTIME_WATCH_ROOT it walks the app directory
// alone, and the set is refused.
func TestRuntimeWithoutAppDirectoryReadsTheSiblings(t *testing.T) {
	base := tree(t, map[string]string{
		"rl/config.extra.yaml": "domain: extra",
		"rl/config.old/c.yaml": "domain: old",
		"rl/configx.yaml":      "domain: x",
	})
	rt := Runtime{Root: base, Subdirectory: "rl", AppDirectory: "config", WatchRoot: true}
	files, err := rt.Read()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := paths(t, base, files), []string{"rl/config.extra.yaml", "rl/config.old/c.yaml"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("%q, want %q", got, want)
	}
	rt.WatchRoot = false
	if files, err := rt.Read(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("RUNTIME_WATCH_ROOT=false: %d files, %v; want the directory's absence", len(files), err)
	}
}
