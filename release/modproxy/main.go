// Command modproxy writes a Go module proxy directory (for
// GOPROXY=file://DIR) that serves every module of a working tree of this
// repository at one version, as a release publishes them: for each module
// its zip (made by golang.org/x/mod/zip, which leaves out nested modules),
// its go.mod, and its go.sum completed with the checksums of the
// repository's own modules it requires at that version.
//
// Usage, from the release module:
//
//	go run ./modproxy -repo .. -out DIR
//
// The version is the one every module requires its siblings at (they
// must agree; -version checks it). The files are those git tracks or
// would track (git ls-files --cached --others --exclude-standard), as
// they are in the working tree. A module with a replace directive is
// refused: go install pkg@version refuses it too. So is a go.work at the
// root whose replace directives map the modules to their directories at
// another version than the one required (a release's version bump done in
// the go.mod files only): the workspace would then look for the new
// version in a module proxy, and fail. modproxy prints the version on
// standard output.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
	"golang.org/x/mod/zip"
)

func main() {
	repo := flag.String("repo", "..", "the repository's working tree")
	out := flag.String("out", "", "the proxy directory to write (required)")
	version := flag.String("version", "", "the version the modules must require each other at (default: the one they do)")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: modproxy -repo DIR -out DIR [-version vX.Y.Z]")
		os.Exit(2)
	}
	v, err := writeProxy(*repo, *out, *version)
	if err != nil {
		fmt.Fprintf(os.Stderr, "modproxy: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(v)
}

// mod is one module of the repository.
type mod struct {
	path string // module path
	dir  string // relative to the repository, "." for the root
	file *modfile.File
	sums []string // "path version h1:..." lines of this module and its go.mod, once zipped
}

func writeProxy(repo, out, version string) (string, error) {
	files, err := trackedFiles(repo)
	if err != nil {
		return "", err
	}
	mods, err := findModules(repo, files)
	if err != nil {
		return "", err
	}
	version, err = releaseVersion(mods, version)
	if err != nil {
		return "", err
	}
	if err := checkWorkspace(repo, mods, version); err != nil {
		return "", err
	}
	staging, err := os.MkdirTemp("", "modproxy-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(staging)
	done := map[string]*mod{}
	for len(done) < len(mods) {
		progress := false
		for _, m := range mods {
			if done[m.path] != nil || !siblingsDone(m, mods, done) {
				continue
			}
			if err := publish(repo, staging, out, m, mods, done, files, version); err != nil {
				return "", fmt.Errorf("%s: %w", m.path, err)
			}
			done[m.path] = m
			progress = true
		}
		if !progress {
			return "", errors.New("the modules require each other in a cycle")
		}
	}
	return version, nil
}

// trackedFiles lists the files of the working tree git tracks or would.
func trackedFiles(repo string) ([]string, error) {
	cmd := exec.Command("git", "-C", repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	outb, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files in %s: %w", repo, err)
	}
	var files []string
	for f := range strings.SplitSeq(strings.TrimRight(string(outb), "\x00"), "\x00") {
		if _, err := os.Lstat(filepath.Join(repo, f)); err == nil { // deleted, not yet committed
			files = append(files, f)
		}
	}
	return files, nil
}

func findModules(repo string, files []string) ([]*mod, error) {
	var mods []*mod
	for _, f := range files {
		if filepath.Base(f) != "go.mod" || strings.Contains("/"+f, "/testdata/") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(repo, f))
		if err != nil {
			return nil, err
		}
		mf, err := modfile.Parse(f, data, nil)
		if err != nil {
			return nil, err
		}
		if len(mf.Replace) > 0 {
			return nil, fmt.Errorf("%s has a replace directive; a released module cannot (use go.work for development)", f)
		}
		mods = append(mods, &mod{path: mf.Module.Mod.Path, dir: filepath.Dir(f), file: mf})
	}
	if len(mods) == 0 {
		return nil, fmt.Errorf("no go.mod in %s", repo)
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].path < mods[j].path })
	return mods, nil
}

func isSibling(path string, mods []*mod) bool {
	for _, m := range mods {
		if m.path == path {
			return true
		}
	}
	return false
}

// releaseVersion is the one version at which the modules require each
// other.
func releaseVersion(mods []*mod, want string) (string, error) {
	version := want
	for _, m := range mods {
		for _, r := range m.file.Require {
			if !isSibling(r.Mod.Path, mods) {
				continue
			}
			if version == "" {
				version = r.Mod.Version
			}
			if r.Mod.Version != version {
				return "", fmt.Errorf("%s requires %s %s, not the release's %s: require every module of the repository at one version",
					m.path, r.Mod.Path, r.Mod.Version, version)
			}
		}
	}
	if version == "" {
		return "", errors.New("no module requires another: give -version")
	}
	if !strings.HasPrefix(version, "v") || module.Check("example.com/m", version) != nil {
		return "", fmt.Errorf("version %q is not a semantic version", version)
	}
	return version, nil
}

// checkWorkspace holds the go.work at the root of repo, if there is one,
// to the release version: each module of the repository that another
// requires is replaced there, at that version (or at every version), by
// its own directory, and no replace names a module of the repository at
// another version. A module of the workspace is built from its directory
// all the same, but the go command reads the go.mod of the version required
// of it, which is not published before the release: only such a replace
// keeps it from asking a module proxy.
func checkWorkspace(repo string, mods []*mod, version string) error {
	name := filepath.Join(repo, "go.work")
	data, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	work, err := modfile.ParseWork(name, data, nil)
	if err != nil {
		return err
	}
	dirs := map[string]string{}
	for _, m := range mods {
		dirs[m.path] = m.dir
	}
	var errs []error
	replaced, reported := map[string]bool{}, map[string]bool{}
	for _, r := range work.Replace {
		dir, ok := dirs[r.Old.Path]
		if !ok {
			continue
		}
		if r.Old.Version != "" && r.Old.Version != version {
			errs = append(errs, fmt.Errorf("go.work replaces %s %s, but the modules require it at %s: bump go.work's replace directives with the go.mod files (docs/releasing.md)",
				r.Old.Path, r.Old.Version, version))
			reported[r.Old.Path] = true
			continue
		}
		if r.New.Version != "" || filepath.Clean(r.New.Path) != dir {
			errs = append(errs, fmt.Errorf("go.work replaces %s with %s, not with its directory %s", r.Old.Path, r.New, "./"+strings.TrimPrefix(filepath.ToSlash(dir), ".")))
			reported[r.Old.Path] = true
			continue
		}
		replaced[r.Old.Path] = true
	}
	for _, m := range mods {
		for _, r := range m.file.Require {
			if _, ok := dirs[r.Mod.Path]; ok && !replaced[r.Mod.Path] && !reported[r.Mod.Path] {
				reported[r.Mod.Path] = true
				errs = append(errs, fmt.Errorf("go.work does not replace %s %s (required by %s) with its directory: the workspace would look for that version in a module proxy",
					r.Mod.Path, version, m.path))
			}
		}
	}
	return errors.Join(errs...)
}

func siblingsDone(m *mod, mods []*mod, done map[string]*mod) bool {
	for _, r := range m.file.Require {
		if isSibling(r.Mod.Path, mods) && done[r.Mod.Path] == nil {
			return false
		}
	}
	return true
}

// publish stages m's files with its completed go.sum, zips them and writes
// the proxy's files for m at version.
func publish(repo, staging, out string, m *mod, mods []*mod, done map[string]*mod, files []string, version string) error {
	dir := filepath.Join(staging, strings.ReplaceAll(m.path, "/", "_"))
	prefix := ""
	if m.dir != "." {
		prefix = m.dir + "/"
	}
	for _, f := range files {
		if !strings.HasPrefix(f, prefix) {
			continue
		}
		if err := copyFile(filepath.Join(repo, f), filepath.Join(dir, strings.TrimPrefix(f, prefix))); err != nil {
			return err
		}
	}
	sum, err := completedSum(filepath.Join(dir, "go.sum"), m, mods, done)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		return err
	}

	escaped, err := module.EscapePath(m.path)
	if err != nil {
		return err
	}
	vdir := filepath.Join(out, escaped, "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	zipPath := filepath.Join(vdir, version+".zip")
	zf, err := os.Create(zipPath)
	if err != nil {
		return err
	}
	mv := module.Version{Path: m.path, Version: version}
	if err := zip.CreateFromDir(zf, mv, dir); err != nil {
		zf.Close()
		return fmt.Errorf("zip: %w", err)
	}
	if err := zf.Close(); err != nil {
		return err
	}
	goMod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	info := fmt.Sprintf("{\"Version\":%q,\"Time\":%q}\n", version, time.Now().UTC().Format(time.RFC3339))
	for name, data := range map[string][]byte{version + ".mod": goMod, version + ".info": []byte(info), "list": []byte(version + "\n")} {
		if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
			return err
		}
	}
	zipHash, err := dirhash.HashZip(zipPath, dirhash.Hash1)
	if err != nil {
		return err
	}
	modHash, err := dirhash.Hash1([]string{"go.mod"}, func(string) (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(string(goMod))), nil
	})
	if err != nil {
		return err
	}
	m.sums = []string{
		fmt.Sprintf("%s %s %s", m.path, version, zipHash),
		fmt.Sprintf("%s %s/go.mod %s", m.path, version, modHash),
	}
	return nil
}

// completedSum is m's go.sum without lines of the repository's modules,
// plus the checksums of those m requires, directly or through another.
func completedSum(path string, m *mod, mods []*mod, done map[string]*mod) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	var lines []string
	for line := range strings.SplitSeq(string(data), "\n") {
		if fields := strings.Fields(line); len(fields) > 0 && !isSibling(fields[0], mods) {
			lines = append(lines, line)
		}
	}
	seen := map[string]bool{}
	var visit func(*mod)
	visit = func(x *mod) {
		for _, r := range x.file.Require {
			if d := done[r.Mod.Path]; d != nil && !seen[d.path] {
				seen[d.path] = true
				lines = append(lines, d.sums...)
				visit(d)
			}
		}
	}
	visit(m)
	sort.Strings(lines)
	return []byte(strings.Join(lines, "\n") + "\n"), nil
}

func copyFile(from, to string) error {
	info, err := os.Lstat(from)
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return nil // symlinks and the like are not module content
	}
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o644)
}
