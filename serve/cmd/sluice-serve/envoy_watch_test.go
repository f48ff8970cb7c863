package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/serve/envoyratelimit/settings"
)

// runtimeTree makes RUNTIME_ROOT=<tmp>/current, a symlink to <tmp>/v1, with
// v1/ratelimit/config/a.yaml, as a deployment with RUNTIME_SUBDIRECTORY
// ratelimit lays it out.
func runtimeTree(t *testing.T, watchRoot bool) (settings.Settings, string) {
	t.Helper()
	base := t.TempDir()
	writeFile(t, filepath.Join(base, "v1", "ratelimit", "config", "a.yaml"), "domain: a\n")
	require.NoError(t, os.Symlink(filepath.Join(base, "v1"), filepath.Join(base, "current")))
	env := []string{"RUNTIME_ROOT=" + filepath.Join(base, "current"), "RUNTIME_SUBDIRECTORY=ratelimit"}
	if !watchRoot {
		env = append(env, "RUNTIME_WATCH_ROOT=false")
	}
	s, err := settings.FromEnv(env)
	require.NoError(t, err)
	return s, base
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

// swapRoot points RUNTIME_ROOT at target as ln -sfn does: a new symlink
// renamed over the old one.
func swapRoot(t *testing.T, root, target string) {
	t.Helper()
	tmp := root + ".tmp"
	require.NoError(t, os.Symlink(target, tmp))
	require.NoError(t, os.Rename(tmp, root))
}

// touchLater makes path's mtime differ from its last, whatever the clock's
// resolution, as a later write would.
func touchLater(t *testing.T, path string) {
	t.Helper()
	info, err := os.Lstat(path)
	require.NoError(t, err)
	later := info.ModTime().Add(time.Second)
	require.NoError(t, os.Chtimes(path, later, later))
}

func TestWatchRootReloadsOnlyWhenTheRootSymlinkChanges(t *testing.T) {
	s, base := runtimeTree(t, true)
	w := newRuntimeWatch(s)
	require.False(t, w.changed(), "nothing changed")

	// In-place edits, additions and removals inside the tree: goruntime's
	// SymlinkRefresher does not reload.
	a := filepath.Join(base, "v1", "ratelimit", "config", "a.yaml")
	writeFile(t, a, "domain: a2\n")
	touchLater(t, a)
	writeFile(t, filepath.Join(base, "v1", "ratelimit", "config", "b.yaml"), "domain: b\n")
	require.NoError(t, os.Chmod(a, 0o600))
	require.False(t, w.changed(), "an edit inside the tree reloaded")

	// The symlink swapped to a new target reloads, once.
	writeFile(t, filepath.Join(base, "v2", "ratelimit", "config", "a.yaml"), "domain: a\n")
	swapRoot(t, s.RuntimeRoot, filepath.Join(base, "v2"))
	require.True(t, w.changed(), "a swapped symlink did not reload")
	require.False(t, w.changed(), "one swap reloaded twice")

	// Swapped again to the same target: a new link, as a Create event.
	swapRoot(t, s.RuntimeRoot, filepath.Join(base, "v2"))
	require.True(t, w.changed(), "a new link to the same target did not reload")

	// Removed: no Create event; created again: one.
	require.NoError(t, os.Remove(s.RuntimeRoot))
	require.False(t, w.changed(), "a removed root reloaded")
	require.NoError(t, os.Symlink(filepath.Join(base, "v1"), s.RuntimeRoot))
	require.True(t, w.changed(), "a created root did not reload")
}

func TestWatchRootOnAPlainDirectoryNeverReloadsOnItsFiles(t *testing.T) {
	base := t.TempDir()
	writeFile(t, filepath.Join(base, "root", "rl", "config", "a.yaml"), "domain: a\n")
	s, err := settings.FromEnv([]string{"RUNTIME_ROOT=" + filepath.Join(base, "root"), "RUNTIME_SUBDIRECTORY=rl"})
	require.NoError(t, err)
	w := newRuntimeWatch(s)
	writeFile(t, filepath.Join(base, "root", "new.yaml"), "domain: n\n") // changes root's own mtime
	touchLater(t, filepath.Join(base, "root"))
	require.False(t, w.changed(), "a file added in RUNTIME_ROOT, a directory, reloaded")
}

func TestWatchDirectoryReloadsOnEachEntryChange(t *testing.T) {
	s, _ := runtimeTree(t, false)
	dir := s.ConfigDir()
	a := filepath.Join(dir, "a.yaml")
	w := newRuntimeWatch(s)
	require.False(t, w.changed(), "nothing changed")

	steps := []struct {
		name   string
		do     func()
		reload bool
	}{
		{"written in place", func() { writeFile(t, a, "domain: a2\n"); touchLater(t, a) }, true},
		{"created", func() { writeFile(t, filepath.Join(dir, "b.yaml"), "domain: b\n") }, true},
		{"chmod-ed", func() { require.NoError(t, os.Chmod(a, 0o600)) }, true},
		// Their Chmod event also comes of a chmod to the mode a file has
		// and of a chown: Sluice reloads when the mode or the owner
		// changed, which can change what loads, and not otherwise.
		{"chmod-ed to the mode it has", func() { require.NoError(t, os.Chmod(a, 0o600)) }, false},
		{"chown-ed", func() { chownOther(t, a) }, true},
		{"renamed out of the directory", func() {
			// A deliberate difference: theirs sees a Rename event, which
			// it does not reload on, and keeps the file's rules.
			require.NoError(t, os.Rename(filepath.Join(dir, "b.yaml"), filepath.Join(filepath.Dir(dir), "b.moved")))
		}, true},
		{"created again", func() { writeFile(t, filepath.Join(dir, "b.yaml"), "domain: b\n") }, true},
		{"removed", func() { require.NoError(t, os.Remove(filepath.Join(dir, "b.yaml"))) }, true},
		{"renamed over", func() {
			tmp := filepath.Join(filepath.Dir(dir), "a.new")
			writeFile(t, tmp, "domain: a3\n")
			require.NoError(t, os.Rename(tmp, a))
		}, true},
		{"a dotfile created", func() { writeFile(t, filepath.Join(dir, ".hidden"), "x") }, true},
		{"a file in a subdirectory written", func() {
			writeFile(t, filepath.Join(dir, "sub", "c.yaml"), "domain: c\n")
			require.True(t, w.changed(), "the subdirectory's creation is a Create")
			writeFile(t, filepath.Join(dir, "sub", "c.yaml"), "domain: c2\n")
			touchLater(t, filepath.Join(dir, "sub", "c.yaml"))
			touchLater(t, filepath.Join(dir, "sub"))
		}, false},
		{"a file beside the directory written", func() { writeFile(t, filepath.Join(filepath.Dir(dir), "other.yaml"), "x") }, false},
	}
	for _, step := range steps {
		step.do()
		require.Equal(t, step.reload, w.changed(), step.name)
		require.False(t, w.changed(), "%s: reloaded twice", step.name)
	}
}

// chownOther gives path another group (root's tests) or skips the test.
func chownOther(t *testing.T, path string) {
	t.Helper()
	info, err := os.Stat(path)
	require.NoError(t, err)
	uid, gid, ok := owner(info)
	if !ok || os.Getuid() != 0 {
		t.Skip("a chown to another group needs root on unix")
	}
	require.NoError(t, os.Chown(path, int(uid), int(gid+1)))
}

func TestPollRuntimeReloadsOnAChange(t *testing.T) {
	s, base := runtimeTree(t, true)
	reloaded := make(chan struct{}, 10)
	stop := pollRuntime(newRuntimeWatch(s), time.Millisecond, func() { reloaded <- struct{}{} })
	defer stop()
	writeFile(t, filepath.Join(base, "v2", "ratelimit", "config", "a.yaml"), "domain: a\n")
	swapRoot(t, s.RuntimeRoot, filepath.Join(base, "v2"))
	select {
	case <-reloaded:
	case <-time.After(20 * time.Second):
		t.Fatal("no reload within 20 s of a swap")
	}
}
