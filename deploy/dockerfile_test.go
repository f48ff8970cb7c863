package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/version"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line int    // where it starts
	cmd  string // upper case: FROM, RUN, COPY, ...
	args string
}

// stage is a FROM and the instructions up to the next FROM.
type stage struct {
	image, name  string // FROM [--platform=...] image [AS name]
	instructions []instruction
}

// parseDockerfile splits a Dockerfile into stages. It knows what
// deploy/Dockerfile uses: comments, continuation lines, FROM with flags and
// AS; a heredoc or an instruction before the first FROM (other than ARG) is
// an error rather than misread.
func parseDockerfile(data string) ([]stage, error) {
	var stages []stage
	lines := strings.Split(data, "\n")
	for i := 0; i < len(lines); i++ {
		start := i + 1
		text := strings.TrimSpace(lines[i])
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		for strings.HasSuffix(text, `\`) && i+1 < len(lines) {
			i++
			next := strings.TrimSpace(lines[i])
			if strings.HasPrefix(next, "#") {
				continue // a comment inside a continued instruction
			}
			text = strings.TrimSuffix(text, `\`) + " " + next
		}
		cmd, args, _ := strings.Cut(text, " ")
		in := instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if strings.Contains(in.args, "<<") {
			return nil, fmt.Errorf("line %d: heredocs are not parsed here", start)
		}
		if in.cmd == "FROM" {
			fields := strings.Fields(in.args)
			for len(fields) > 0 && strings.HasPrefix(fields[0], "--") {
				fields = fields[1:]
			}
			s := stage{}
			switch {
			case len(fields) == 1:
				s.image = fields[0]
			case len(fields) == 3 && strings.EqualFold(fields[1], "AS"):
				s.image, s.name = fields[0], fields[2]
			default:
				return nil, fmt.Errorf("line %d: FROM %s: want an image and an optional AS name", start, in.args)
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			if in.cmd == "ARG" {
				continue
			}
			return nil, fmt.Errorf("line %d: %s before the first FROM", start, in.cmd)
		}
		last := &stages[len(stages)-1]
		last.instructions = append(last.instructions, in)
	}
	if len(stages) == 0 {
		return nil, errors.New("no FROM")
	}
	return stages, nil
}

// image is what the Dockerfile's final stage is made of.
type image struct {
	base       string   // the final stage's FROM
	builder    string   // the image of the stage that runs build-static.sh
	uid, gid   int      // USER
	entrypoint []string // ENTRYPOINT, exec form
	outDir     string   // build-static.sh's OUTDIR in the builder
	binDir     string   // where the final stage copies OUTDIR
}

var buildScriptRun = regexp.MustCompile(`(?:^|[\s;&|])(?:sh\s+|\./)?deploy/build-static\.sh\s+(\S+)`)

// readImage reads what the checks need from a Dockerfile: the final
// stage's base, USER, ENTRYPOINT and the COPY --from of the stage whose
// RUN calls deploy/build-static.sh. Anything it cannot find is an error.
func readImage(data string) (image, error) {
	stages, err := parseDockerfile(data)
	if err != nil {
		return image{}, err
	}
	final := stages[len(stages)-1]
	img := image{base: final.image, uid: -1, gid: -1}
	for _, in := range final.instructions {
		switch in.cmd {
		case "USER":
			user, group, hasGroup := strings.Cut(in.args, ":")
			uid, err := strconv.Atoi(user)
			if err != nil {
				return img, fmt.Errorf("line %d: USER %s: want a numeric uid (Kubernetes' runAsNonRoot checks only a numeric one)", in.line, in.args)
			}
			img.uid = uid
			if hasGroup {
				if img.gid, err = strconv.Atoi(group); err != nil {
					return img, fmt.Errorf("line %d: USER %s: want a numeric gid", in.line, in.args)
				}
			}
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(in.args), &img.entrypoint); err != nil || len(img.entrypoint) == 0 {
				return img, fmt.Errorf("line %d: ENTRYPOINT %s: want the exec form, a JSON array", in.line, in.args)
			}
		case "COPY":
			fields := strings.Fields(in.args)
			if len(fields) != 3 || !strings.HasPrefix(fields[0], "--from=") {
				continue
			}
			from := strings.TrimPrefix(fields[0], "--from=")
			for _, s := range stages[:len(stages)-1] {
				if s.name != from {
					continue
				}
				for _, run := range s.instructions {
					m := buildScriptRun.FindStringSubmatch(run.args)
					if run.cmd == "RUN" && m != nil && path.Clean(m[1]) == path.Clean(fields[1]) {
						img.builder, img.outDir, img.binDir = s.image, path.Clean(m[1]), path.Clean(fields[2])
					}
				}
			}
		}
	}
	switch {
	case img.uid < 0:
		return img, errors.New("the final stage has no USER: the image would run as root")
	case img.entrypoint == nil:
		return img, errors.New("the final stage has no ENTRYPOINT")
	case img.builder == "":
		return img, errors.New("no COPY --from of the OUTDIR of a stage whose RUN calls deploy/build-static.sh OUTDIR: the image would not be built by CI's build steps")
	}
	return img, nil
}

// goDirectives returns the go (and toolchain) versions the modules that
// build-static.sh builds ask for, as "go1.x.y".
func goDirectives(t *testing.T) []string {
	t.Helper()
	var versions []string
	for _, name := range []string{"../go.mod", "../serve/go.mod", "../go.work"} {
		data, err := os.ReadFile(name)
		if errors.Is(err, os.ErrNotExist) && name == "../go.work" {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^(?:go (\S+)|toolchain go(\S+))\s*$`).FindAllStringSubmatch(string(data), -1) {
			versions = append(versions, "go"+m[1]+m[2])
		}
	}
	return versions
}

var goImage = regexp.MustCompile(`^golang:(\d+\.\d+\.\d+)(?:-[a-z0-9]+)?(?:@sha256:[0-9a-f]{64})?$`)

// checkImage holds an image to what the manifests and the binary need:
// non-root by number, a minimal static base, a builder pinned to a Go
// release at least as new as every module asks for.
func checkImage(img image, goVersions []string) error {
	var errs []error
	if img.uid == 0 || img.gid == 0 {
		errs = append(errs, fmt.Errorf("USER %d:%d: root", img.uid, img.gid))
	}
	if img.base != "scratch" && !strings.HasPrefix(img.base, "gcr.io/distroless/static") {
		errs = append(errs, fmt.Errorf("final stage FROM %s: want gcr.io/distroless/static (or scratch): the binary is static", img.base))
	}
	m := goImage.FindStringSubmatch(img.builder)
	if m == nil {
		errs = append(errs, fmt.Errorf("builder FROM %s: want golang:X.Y.Z, pinned to a release", img.builder))
	} else {
		for _, v := range goVersions {
			if version.Compare("go"+m[1], v) < 0 {
				errs = append(errs, fmt.Errorf("builder FROM %s: older than %s, which a module asks for", img.builder, v))
			}
		}
	}
	return errors.Join(errs...)
}

func readDockerfile(t *testing.T) image {
	t.Helper()
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	img, err := readImage(string(data))
	if err != nil {
		t.Fatalf("deploy/Dockerfile: %v", err)
	}
	return img
}

func TestDockerfile(t *testing.T) {
	img := readDockerfile(t)
	if err := checkImage(img, goDirectives(t)); err != nil {
		t.Errorf("deploy/Dockerfile: %v", err)
	}
	if want := []string{"/bin/sluice-serve"}; !slices.Equal(img.entrypoint, want) {
		t.Errorf("ENTRYPOINT %q, want %q", img.entrypoint, want)
	}
	if img.binDir != "/bin" {
		t.Errorf("build-static.sh's OUTDIR is copied to %s, want /bin (for /bin/ratelimit)", img.binDir)
	}
}

// TestDockerfileChecksRefuse holds readImage and checkImage to their
// contract on Dockerfiles that break one rule each.
func TestDockerfileChecksRefuse(t *testing.T) {
	const builder = "FROM golang:1.26.8 AS build\nRUN sh deploy/build-static.sh /out\n"
	goVersions := []string{"go1.26.0"}
	for _, c := range []struct{ name, dockerfile, want string }{
		{"root", builder + "FROM scratch\nCOPY --from=build /out/ /bin/\nUSER 0\nENTRYPOINT [\"/bin/sluice-serve\"]\n", "root"},
		{"named user", builder + "FROM scratch\nCOPY --from=build /out/ /bin/\nUSER nonroot\nENTRYPOINT [\"/bin/sluice-serve\"]\n", "numeric uid"},
		{"no user", builder + "FROM scratch\nCOPY --from=build /out/ /bin/\nENTRYPOINT [\"/bin/sluice-serve\"]\n", "no USER"},
		{"shell entrypoint", builder + "FROM scratch\nCOPY --from=build /out/ /bin/\nUSER 1\nENTRYPOINT /bin/sluice-serve\n", "exec form"},
		{"not the script", "FROM golang:1.26.8 AS build\nRUN go build -o /out/sluice-serve ./serve/cmd/sluice-serve\nFROM scratch\nCOPY --from=build /out/ /bin/\nUSER 1\nENTRYPOINT [\"/bin/sluice-serve\"]\n", "build-static.sh"},
		{"another dir", builder + "FROM scratch\nCOPY --from=build /elsewhere/ /bin/\nUSER 1\nENTRYPOINT [\"/bin/sluice-serve\"]\n", "build-static.sh"},
		{"unpinned go", "FROM golang:latest AS build\nRUN sh deploy/build-static.sh /out\nFROM scratch\nCOPY --from=build /out/ /bin/\nUSER 1\nENTRYPOINT [\"/bin/sluice-serve\"]\n", "pinned"},
		{"old go", "FROM golang:1.25.4 AS build\nRUN sh deploy/build-static.sh /out\nFROM scratch\nCOPY --from=build /out/ /bin/\nUSER 1\nENTRYPOINT [\"/bin/sluice-serve\"]\n", "older than go1.26.0"},
		{"fat base", builder + "FROM debian:12\nCOPY --from=build /out/ /bin/\nUSER 1\nENTRYPOINT [\"/bin/sluice-serve\"]\n", "distroless"},
	} {
		t.Run(c.name, func(t *testing.T) {
			img, err := readImage(c.dockerfile)
			if err == nil {
				err = checkImage(img, goVersions)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}
