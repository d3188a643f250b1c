package imagebuild_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/otelcol-loop/otelcol-loop/internal/imagebuild"
	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, COPY, ...
	args string
}

// stage is a build stage: its FROM arguments and instructions.
type stage struct {
	name, from string
	ins        []instruction
}

func parseDockerfile(t *testing.T, path string) map[string]*stage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stages := map[string]*stage{}
	var cur *stage
	var line strings.Builder
	sc := bufio.NewScanner(f)
	flush := func() {
		s := strings.TrimSpace(line.String())
		line.Reset()
		if s == "" {
			return
		}
		cmd, args, _ := strings.Cut(s, " ")
		cmd, args = strings.ToUpper(cmd), strings.TrimSpace(args)
		if cmd == "FROM" {
			w := words(args)
			cur = &stage{from: args}
			if i := slices.IndexFunc(w, func(s string) bool { return strings.EqualFold(s, "AS") }); i >= 0 && i+1 < len(w) {
				cur.name = w[i+1]
			}
			stages[cur.name] = cur
			return
		}
		if cur != nil {
			cur.ins = append(cur.ins, instruction{cmd, args})
		}
	}
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			line.WriteString(strings.TrimSuffix(l, "\\") + " ")
			continue
		}
		line.WriteString(l)
		flush()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	flush()
	return stages
}

// words splits like a shell: blanks separate, quotes group.
func words(s string) []string {
	var out []string
	var w strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				out = append(out, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, w.String())
	}
	return out
}

func (s *stage) all(cmd string) []string {
	var out []string
	for _, in := range s.ins {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

// copyTo finds the COPY whose destination is dst: its flags and sources.
func (s *stage) copyTo(dst string) (flags, srcs []string, ok bool) {
	for _, a := range s.all("COPY") {
		w := words(a)
		if len(w) < 2 || w[len(w)-1] != dst {
			continue
		}
		for _, x := range w[:len(w)-1] {
			if strings.HasPrefix(x, "--") {
				flags = append(flags, x)
			} else {
				srcs = append(srcs, x)
			}
		}
		return flags, srcs, true
	}
	return nil, nil, false
}

func jsonArgs(t *testing.T, what, s string) []string {
	t.Helper()
	var v []string
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Errorf("%s %s: not the exec (JSON) form: %v", what, s, err)
	}
	return v
}

// TestDockerfileMatchesImageBuild: the Dockerfile's stage for each image
// declares what the daemonless build declares (user, entrypoint, command,
// exposed ports, labels), copies the binary, the baked configuration and the
// shared base files to the same paths, and compiles with the same module,
// flags and environment.
//
//nolint:funlen // A checklist comparing the Dockerfile with the daemonless build field by field.
func TestDockerfileMatchesImageBuild(t *testing.T) {
	root, err := testproc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	stages := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	base, ok := stages["base"]
	if !ok || !slices.ContainsFunc(base.all("RUN"), func(r string) bool {
		return strings.Contains(r, "cd internal/devtools && go run ./cmd/imagebuild -rootfs /rootfs")
	}) {
		t.Fatalf("no stage base writing /rootfs with imagebuild -rootfs")
	}
	for _, im := range imagebuild.Images {
		t.Run(im.Name, func(t *testing.T) {
			s, ok := stages[im.Name]
			if !ok {
				t.Fatalf("no stage %q (docker build --target %s)", im.Name, im.Name)
			}
			if w := words(s.from); len(w) == 0 || w[0] != "scratch" {
				t.Errorf("FROM %s, want scratch", s.from)
			}
			if u := s.all("USER"); len(u) != 1 || u[0] != strconv.Itoa(imagebuild.User) {
				t.Errorf("USER %v, want %d", u, imagebuild.User)
			}
			if e := s.all("ENTRYPOINT"); len(e) != 1 || !slices.Equal(jsonArgs(t, "ENTRYPOINT", e[0]), im.Entrypoint()) {
				t.Errorf("ENTRYPOINT %v, want %q", e, im.Entrypoint())
			}
			if c := s.all("CMD"); len(c) != 1 || !slices.Equal(jsonArgs(t, "CMD", c[0]), im.Cmd()) {
				t.Errorf("CMD %v, want %q", c, im.Cmd())
			}
			var exposed []string
			for _, e := range s.all("EXPOSE") {
				for _, p := range words(e) {
					if !strings.Contains(p, "/") {
						p += "/tcp"
					}
					exposed = append(exposed, p)
				}
			}
			if slices.Sort(exposed); !slices.Equal(exposed, slices.Sorted(slices.Values(im.ExposedPorts()))) {
				t.Errorf("EXPOSE %v, want %v", exposed, im.ExposedPorts())
			}
			labels := map[string]string{}
			for _, l := range s.all("LABEL") {
				for _, kv := range words(l) {
					k, v, _ := strings.Cut(kv, "=")
					labels[k] = v
				}
			}
			for k, want := range map[string]string{
				imagebuild.LabelSource: imagebuild.Source, imagebuild.LabelTitle: im.Name, imagebuild.LabelLicenses: "Apache-2.0",
				imagebuild.LabelVersion: "${VERSION}", imagebuild.LabelRevision: "${REVISION}", imagebuild.LabelCreated: "${CREATED}",
			} {
				if labels[k] != want {
					t.Errorf("LABEL %s=%q, want %q", k, labels[k], want)
				}
			}

			if _, src, ok := s.copyTo("/"); !ok || !slices.Equal(src, []string{"/rootfs/"}) {
				t.Errorf("no COPY --from=base /rootfs/ / (the shared base files)")
			}
			if _, src, ok := s.copyTo(im.ConfigPath()); !ok || !slices.Equal(src, []string{im.Config}) {
				t.Errorf("COPY to %s copies %v, want %s", im.ConfigPath(), src, im.Config)
			}
			if im.DataDir != "" {
				flags, _, ok := s.copyTo(im.DataDir + "/")
				owner := strconv.Itoa(imagebuild.User) + ":" + strconv.Itoa(imagebuild.User)
				if !ok || !slices.Contains(flags, "--chown="+owner) {
					t.Errorf("no COPY --chown=%s to %s/", owner, im.DataDir)
				}
			}
			flags, src, ok := s.copyTo(im.BinaryPath())
			if !ok || len(src) != 1 || !slices.Contains(flags, "--chmod=755") {
				t.Fatalf("no COPY --chmod=755 of the binary to %s", im.BinaryPath())
			}
			from := ""
			for _, f := range flags {
				if v, ok := strings.CutPrefix(f, "--from="); ok {
					from = v
				}
			}
			bs, ok := stages[from]
			if !ok {
				t.Fatalf("the binary comes from stage %q, which is not defined", from)
			}
			env := map[string]string{}
			for _, e := range bs.all("ENV") {
				for _, kv := range words(e) {
					k, v, _ := strings.Cut(kv, "=")
					env[k] = v
				}
			}
			for _, kv := range imagebuild.GoBuildEnv(imagebuild.Platforms[0]) {
				k, v, _ := strings.Cut(kv, "=")
				if k == "GOOS" || k == "GOARCH" {
					continue // from TARGETOS / TARGETARCH, checked below
				}
				if env[k] != v {
					t.Errorf("stage %s: ENV %s=%q, want %q", from, k, env[k], v)
				}
			}
			var build []string
			for _, r := range bs.all("RUN") {
				if w := words(r); slices.Contains(w, "build") {
					build = w
				}
			}
			want := append([]string{"cd", im.ModuleDir, "&&", "GOOS=$TARGETOS", "GOARCH=$TARGETARCH", "go", "build"}, imagebuild.GoBuildFlags...)
			want = append(want, "-o", src[0], ".")
			if !slices.Equal(build, want) {
				t.Errorf("stage %s builds with\n  %q\nwant\n  %q", from, build, want)
			}
		})
	}
}
