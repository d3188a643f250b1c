package config_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// The environment every config file is validated with: the secrets and
// directories the files take from ${env:...}. Values are test-only.
var testEnv = []string{
	// Standard Webhooks secret of the specification's published known-answer vector.
	"LOOPDETECT_WEBHOOK_SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
	// The alert receiver's own secret (it may not share the kill secret).
	"LOOPDETECT_ALERTS_SECRET=whsec_YWxlcnRzLW9ubHktc2VjcmV0LWZvci10aGUtdGVzdHM=",
	"LOOPDETECT_DIGEST_KEY=test-digest-key-0123456789abcdef",
	"LOOP_OTLP_TOKEN=test-otlp-token-0123456789abcdef",
	// container.yaml has no default supervisor: the user must name one.
	"SUPERVISOR_KILL_URL=https://agent-supervisor.agents.svc:9464/kill",
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "builder-config.yaml")); err != nil {
		t.Fatalf("repository root not found: %v", err)
	}
	return root
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// otelcolBinary returns the distribution binary: $OTELCOL_LOOP_BIN if set,
// else one compiled now from the committed cmd/otelcol-loop sources (so the
// test never validates with a stale bin/otelcol-loop).
func otelcolBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("OTELCOL_LOOP_BIN"); p != "" {
		return p
	}
	root := repoRoot(t)
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "otelcol-loop-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "otelcol-loop")
		cmd := exec.Command("go", "build", "-buildvcs=false", "-trimpath", "-o", binPath, ".")
		cmd.Dir = filepath.Join(root, "cmd", "otelcol-loop")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building cmd/otelcol-loop: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

func execValidate(bin, file string) *exec.Cmd {
	return exec.Command(bin, "validate", "--config=file:"+file)
}

func validate(t *testing.T, bin, file string, env []string) (string, error) {
	t.Helper()
	cmd := execValidate(bin, file)
	cmd.Env = append(append(os.Environ(), testEnv...), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestConfigsValidate: every config/*.yaml passes `otelcol-loop validate`.
func TestConfigsValidate(t *testing.T) {
	bin := otelcolBinary(t)
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	for _, want := range []string{"demo.yaml", "local.yaml", "production.yaml", "replay.yaml"} {
		if sort.SearchStrings(files, want) == len(files) || files[sort.SearchStrings(files, want)] != want {
			t.Errorf("config/%s is missing", want)
		}
	}
	for _, f := range files {
		if strings.HasPrefix(f, "gateway") {
			// Tier-1 gateway configs (stock load_balancing exporter): validated
			// by the otelcol-loop-gateway binary in internal/scaleout.
			continue
		}
		t.Run(f, func(t *testing.T) {
			abs, _ := filepath.Abs(f)
			// production.yaml keeps its queue under a directory taken from
			// the environment; point it at a temporary one.
			out, err := validate(t, bin, abs, []string{"LOOPDETECT_STORAGE_DIR=" + t.TempDir()})
			if err != nil {
				t.Fatalf("otelcol-loop validate --config %s: %v\n%s", f, err, out)
			}
		})
	}
}

// TestValidateRejects proves validation is real: a broken copy of the local
// config (unknown key in loop_detect, bad alert_sink endpoint) fails.
func TestValidateRejects(t *testing.T) {
	bin := otelcolBinary(t)
	src, err := os.ReadFile("local.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(string) string{
		"unknown processor key": func(s string) string {
			return strings.Replace(s, "  loop_detect:\n", "  loop_detect:\n    no_such_key: 1\n", 1)
		},
		"plain http to a remote supervisor": func(s string) string {
			return strings.Replace(s, "http://127.0.0.1:", "http://192.0.2.1:", 1)
		},
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			broken := mutate(string(src))
			if broken == string(src) {
				t.Fatalf("mutation did not apply; local.yaml changed shape")
			}
			p := filepath.Join(t.TempDir(), "broken.yaml")
			if err := os.WriteFile(p, []byte(broken), 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := validate(t, bin, p, nil); err == nil {
				t.Fatalf("validate accepted a broken config:\n%s", out)
			}
		})
	}
}

// generatedFiles are the files ocb writes into the output directory.
var generatedFiles = []string{"components.go", "go.mod", "go.sum", "main.go", "main_others.go", "main_windows.go"}

// TestGeneratedDistributionUpToDate regenerates the distribution with ocb
// (.tools/builder, installed by `make tools`/`make test`) into a scratch
// directory at the same depth as cmd/otelcol-loop, so the relative replace
// of the root module is the same, and fails if any generated file differs
// from the committed one.
func TestGeneratedDistributionUpToDate(t *testing.T) {
	checkGenerated(t, ocbDistribution{
		builderEnv: "OCB",
		builder:    filepath.Join(".tools", "builder"),
		manifest:   "builder-config.yaml",
		output:     "cmd/otelcol-loop",
		target:     "generate-distribution",
		changed:    "the manifest or the root go.mod changed",
	})
}

// TestGeneratedGatewayUpToDate does the same for the tier-1 gateway: ocb
// v0.161.0 (.tools/builder-v0.161.0/builder, installed by `make tools`/`make
// test`) regenerates cmd/otelcol-loop-gateway from its own manifest.
func TestGeneratedGatewayUpToDate(t *testing.T) {
	checkGenerated(t, ocbDistribution{
		builderEnv: "OCB_GATEWAY",
		builder:    filepath.Join(".tools", "builder-v0.161.0", "builder"),
		manifest:   "cmd/otelcol-loop-gateway/builder-config.yaml",
		output:     "cmd/otelcol-loop-gateway",
		target:     "generate-gateway",
		changed:    "the manifest changed",
	})
}

// ocbDistribution is a collector distribution whose ocb-generated sources
// are committed. Paths are relative to the repository root, slash-separated.
type ocbDistribution struct {
	builderEnv string // names another ocb binary to use
	builder    string // the ocb a Makefile rule installs
	manifest   string // the builder config
	output     string // its output_path, without the leading ./
	target     string // the make target that regenerates it
	changed    string // what makes the sources differ
}

// checkGenerated regenerates d into a scratch directory _build/regen-*, at
// the same depth as d.output (both are two levels below the root) so
// relative replaces resolve the same, and
// fails if any generated file differs from the committed one. It skips when
// the builder is not installed.
func checkGenerated(t *testing.T, d ocbDistribution) {
	t.Helper()
	root := repoRoot(t)
	builder := os.Getenv(d.builderEnv)
	if builder == "" {
		builder = filepath.Join(root, d.builder)
	}
	if _, err := os.Stat(builder); err != nil {
		t.Skipf("ocb not installed at %s (run `make tools`); `make test` installs it", builder)
	}
	manifest, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(d.manifest)))
	if err != nil {
		t.Fatal(err)
	}
	committed := "output_path: ./" + d.output
	if !bytes.Contains(manifest, []byte(committed)) {
		t.Fatalf("%s no longer has %q", d.manifest, committed)
	}
	if err := os.MkdirAll(filepath.Join(root, "_build"), 0o755); err != nil {
		t.Fatal(err)
	}
	scratch, err := os.MkdirTemp(filepath.Join(root, "_build"), "regen-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(scratch)
	rel, _ := filepath.Rel(root, scratch)
	cfgPath := filepath.Join(t.TempDir(), "builder-config.yaml")
	cfg := bytes.Replace(manifest, []byte(committed), []byte("output_path: ./"+filepath.ToSlash(rel)), 1)
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(builder, "--config", cfgPath, "--skip-compilation")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ocb: %v\n%s", err, out)
	}
	for _, f := range generatedFiles {
		got, err := os.ReadFile(filepath.Join(scratch, f))
		if err != nil {
			t.Errorf("ocb did not write %s: %v", f, err)
			continue
		}
		want, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(d.output), f))
		if err != nil {
			t.Errorf("%s/%s is not committed: %v", d.output, f, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s/%s differs from what %s generates (%s);"+
				" run `make %s` and commit %s\n%s",
				d.output, f, d.manifest, d.changed, d.target, d.output,
				firstDiff(string(want), string(got)))
		}
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  committed: %s\n  generated: %s", i+1, x, y)
		}
	}
	return ""
}
