package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTheWorkspaceReplacesTheReleaseVersion holds this repository's go.work
// to the version its modules require each other at: a release that bumps
// the go.mod files and not go.work's replace directives fails it.
func TestTheWorkspaceReplacesTheReleaseVersion(t *testing.T) {
	repo := filepath.Join("..", "..")
	files, err := trackedFiles(repo)
	if err != nil {
		t.Fatal(err)
	}
	mods, err := findModules(repo, files)
	if err != nil {
		t.Fatal(err)
	}
	version, err := releaseVersion(mods, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(repo, "go.work")); err != nil {
		t.Fatalf("the repository has no go.work: %v", err)
	}
	if err := checkWorkspace(repo, mods, version); err != nil {
		t.Errorf("go.work, at release %s:\n%v", version, err)
	}
}

// tree writes a repository of two modules, sluice and sluice/serve, serve
// requiring sluice at v0.2.0, and work as its go.work ("" for none).
func tree(t *testing.T, work string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{
		"go.mod":         "module github.com/sluicehq/sluice\n\ngo 1.26.0\n",
		"sluice.go":      "package sluice\n",
		"serve/go.mod":   "module github.com/sluicehq/sluice/serve\n\ngo 1.26.0\n\nrequire github.com/sluicehq/sluice v0.2.0\n",
		"serve/serve.go": "package serve\n\nimport _ \"github.com/sluicehq/sluice\"\n",
	} {
		write(t, filepath.Join(dir, name), content)
	}
	if work != "" {
		write(t, filepath.Join(dir, "go.work"), "go 1.26.0\n\nuse (\n\t.\n\t./serve\n)\n\n"+work)
	}
	return dir
}

func write(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCheckWorkspace(t *testing.T) {
	for _, c := range []struct{ name, work, want string }{
		{"at the release version", "replace github.com/sluicehq/sluice v0.2.0 => ./\n", ""},
		{"at every version", "replace github.com/sluicehq/sluice => ./\n", ""},
		{"no go.work", "", ""},
		{"at the version before", "replace github.com/sluicehq/sluice v0.1.0 => ./\n",
			"go.work replaces github.com/sluicehq/sluice v0.1.0, but the modules require it at v0.2.0"},
		{"not replaced", "replace example.com/other v1.0.0 => ../other\n",
			"go.work does not replace github.com/sluicehq/sluice v0.2.0 (required by github.com/sluicehq/sluice/serve)"},
		{"another directory", "replace github.com/sluicehq/sluice v0.2.0 => ./serve\n",
			"go.work replaces github.com/sluicehq/sluice with ./serve, not with its directory ./"},
		{"a published version", "replace github.com/sluicehq/sluice v0.2.0 => github.com/sluicehq/sluice v0.1.0\n",
			"not with its directory ./"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := tree(t, c.work)
			mods, err := findModules(dir, []string{"go.mod", "serve/go.mod"})
			if err != nil {
				t.Fatal(err)
			}
			version, err := releaseVersion(mods, "")
			if err != nil {
				t.Fatal(err)
			}
			err = checkWorkspace(dir, mods, version)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("got %v, want none", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// TestWriteProxyChecksTheWorkspace: modproxy refuses a go.work left at the
// version before, and with it bumped serves each module at the release
// version, listed in @v/list (from which a go get with no version, that
// is @latest, resolves it).
func TestWriteProxyChecksTheWorkspace(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed: modproxy lists the files of a tree with git ls-files")
	}
	dir := tree(t, "replace github.com/sluicehq/sluice v0.1.0 => ./\n")
	if out, err := exec.Command("git", "-C", dir, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	out := t.TempDir()
	if _, err := writeProxy(dir, filepath.Join(out, "stale"), ""); err == nil || !strings.Contains(err.Error(), "go.work replaces github.com/sluicehq/sluice v0.1.0") {
		t.Errorf("a go.work at v0.1.0: got %v, want a refusal naming it", err)
	}
	write(t, filepath.Join(dir, "go.work"), "go 1.26.0\n\nuse (\n\t.\n\t./serve\n)\n\nreplace github.com/sluicehq/sluice v0.2.0 => ./\n")
	version, err := writeProxy(dir, filepath.Join(out, "bumped"), "")
	if err != nil || version != "v0.2.0" {
		t.Fatalf("got %q, %v; want v0.2.0", version, err)
	}
	for _, path := range []string{"github.com/sluicehq/sluice", "github.com/sluicehq/sluice/serve"} {
		list, err := os.ReadFile(filepath.Join(out, "bumped", path, "@v", "list"))
		if err != nil || string(list) != "v0.2.0\n" {
			t.Errorf("%s/@v/list: %q, %v; want v0.2.0", path, list, err)
		}
	}
}
