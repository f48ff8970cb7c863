package deploy

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// built is build-static.sh's OUTDIR, written once for every test that
// needs the binaries and removed by TestMain.
var built struct {
	once   sync.Once
	dir    string
	output []byte
	err    error
}

// buildStatic runs deploy/build-static.sh once and returns its OUTDIR.
func buildStatic(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "sluice-deploy-")
		if built.err == nil {
			built.output, built.err = exec.Command("sh", "build-static.sh", built.dir).CombinedOutput()
		}
	})
	if built.err != nil {
		t.Fatalf("build-static.sh: %v\n%s", built.err, built.output)
	}
	return built.dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// TestBuildStaticScript runs deploy/build-static.sh, the Dockerfile's
// build steps, and checks what the image would hold: a static sluice-serve
// that runs, at the ENTRYPOINT's path and at /bin/ratelimit.
func TestBuildStaticScript(t *testing.T) {
	out := buildStatic(t)

	// What the final stage's COPY --from=build OUTDIR/ /bin/ puts in the
	// image: each entry of OUTDIR under binDir, symbolic links resolved.
	img := readDockerfile(t)
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	inImage := map[string]string{} // image path -> the file of out it is
	for _, e := range entries {
		name := filepath.Join(out, e.Name())
		target := name
		if e.Type()&os.ModeSymlink != 0 {
			link, err := os.Readlink(name)
			if err != nil {
				t.Fatal(err)
			}
			if path.IsAbs(link) || strings.Contains(link, "/") {
				t.Errorf("%s -> %s: want a link within OUTDIR (the image copies OUTDIR elsewhere)", e.Name(), link)
			}
			target = filepath.Join(out, link)
		} else if !e.Type().IsRegular() {
			t.Errorf("%s: neither a file nor a symbolic link", e.Name())
			continue
		}
		inImage[path.Join(img.binDir, e.Name())] = target
	}
	server := filepath.Join(out, "sluice-serve")
	for _, p := range []string{img.entrypoint[0], "/bin/ratelimit"} {
		if inImage[p] != server {
			t.Errorf("the image's %s is %q, want build-static.sh's sluice-serve (the image holds %v)", p, inImage[p], inImage)
		}
	}

	if err := staticError(server); err != nil {
		t.Errorf("%s: not static: %v", server, err)
	}
	for _, name := range []string{"sluice-serve", "ratelimit"} {
		cmd := exec.Command(filepath.Join(out, name), "--help")
		if output, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(output), "sluice") {
			t.Errorf("%s --help: %v, want exit 0 and a usage text naming sluice\n%s", name, err, output)
		}
	}
}

// staticError says why the ELF file at name is not statically linked, or
// returns nil: it must ask for no dynamic loader (no PT_INTERP or
// PT_DYNAMIC segment, no .interp or .dynamic section, no needed library)
// and not be position-independent.
func staticError(name string) error {
	f, err := elf.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	var errs []error
	if f.Type != elf.ET_EXEC {
		errs = append(errs, fmt.Errorf("ELF type %v, want EXEC (a position-independent executable needs a loader)", f.Type))
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			errs = append(errs, fmt.Errorf("a %v segment", p.Type))
		}
	}
	for _, s := range []string{".interp", ".dynamic"} {
		if f.Section(s) != nil {
			errs = append(errs, fmt.Errorf("a %s section", s))
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		errs = append(errs, fmt.Errorf("imported libraries %v (%v)", libs, err))
	}
	return errors.Join(errs...)
}

// TestStaticErrorSeesADynamicExecutable holds staticError to its contract
// on the shell that ran build-static.sh, which Debian and Ubuntu link
// dynamically against libc.
func TestStaticErrorSeesADynamicExecutable(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	sh, err = filepath.EvalSymlinks(sh)
	if err != nil {
		t.Fatal(err)
	}
	err = staticError(sh)
	if err == nil || !strings.Contains(err.Error(), "PT_INTERP") {
		t.Errorf("staticError(%s) = %v, want a PT_INTERP segment reported", sh, err)
	}
}
