package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/otelcol-loop/otelcol-loop/internal/deploygen"
)

// loopbackOnly are the shipped configurations that listen on loopback only
// and may run without a digest key or TLS: one machine, one user.
var loopbackOnly = map[string]bool{"config/local.yaml": true, "config/demo.yaml": true, "config/replay.yaml": true}

// shippedConfigs returns the text of every shipped collector configuration:
// config/*.yaml and the tier-2 ConfigMap (the Helm and Operator forms are
// generated from it), keyed by a name.
func shippedConfigs(t *testing.T) map[string]string {
	t.Helper()
	root := repoRoot(t)
	configs := map[string]string{}
	files, err := filepath.Glob(filepath.Join(root, "config", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		configs["config/"+filepath.Base(f)] = string(b)
	}
	configs["tier-2 ConfigMap"] = tier2Config(t)
	return configs
}

// tier2Config is the collector configuration of deploy/kubernetes/tier2.yaml.
func tier2Config(t *testing.T) string {
	t.Helper()
	m, err := deploygen.Manifests(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := deploygen.Tier2Config(m)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func decodeYAML(t *testing.T, name, text string) deploygen.Obj {
	t.Helper()
	var o deploygen.Obj
	if err := yaml.Unmarshal([]byte(text), &o); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return o
}

// withoutEnv is the validation environment with the variable name unset.
func withoutEnv(name string, extra ...string) []string {
	var out []string
	for _, e := range append(append(os.Environ(), testEnv...), extra...) {
		if !strings.HasPrefix(e, name+"=") {
			out = append(out, e)
		}
	}
	return out
}

// TestDigestKeyRequiredOffLoopback: every shipped configuration with a
// loop_detect processor that is not loopback-only sets require_digest_key,
// so its events never carry unkeyed digests.
func TestDigestKeyRequiredOffLoopback(t *testing.T) {
	n := 0
	for name, text := range shippedConfigs(t) {
		cfg := decodeYAML(t, name, text)
		for id, p := range deploygen.Get(cfg, "processors").(deploygen.Obj) {
			if id != "loop_detect" && !strings.HasPrefix(id, "loop_detect/") {
				continue
			}
			if loopbackOnly[name] {
				continue
			}
			n++
			if deploygen.Get(p, "require_digest_key") != true {
				t.Errorf("%s: processors::%s::require_digest_key is %v, want true (only loopback-only configs may run without a digest key)", name, id, deploygen.Get(p, "require_digest_key"))
			}
			if k := deploygen.Str(p, "digest_key"); k != "${env:LOOPDETECT_DIGEST_KEY}" {
				t.Errorf("%s: processors::%s::digest_key is %q, want ${env:LOOPDETECT_DIGEST_KEY} with no default", name, id, k)
			}
		}
	}
	if n < 3 {
		t.Errorf("found %d loop_detect processors off loopback, want production, container and tier 2", n)
	}
}

// TestMissingDigestKeyFailsValidation: production.yaml, container.yaml and
// the tier-2 ConfigMap, validated by the built collector with
// LOOPDETECT_DIGEST_KEY unset, fail with an error that names the YAML key
// and the variable.
func TestMissingDigestKeyFailsValidation(t *testing.T) {
	bin := otelcolBinary(t)
	tmp := t.TempDir()
	t2 := filepath.Join(tmp, "tier2.yaml")
	if err := os.WriteFile(t2, []byte(strings.ReplaceAll(tier2Config(t), "/var/lib/otelcol-loop", tmp)), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, file := range map[string]string{"production.yaml": "production.yaml", "container.yaml": "container.yaml", "tier-2 ConfigMap": t2} {
		t.Run(name, func(t *testing.T) {
			abs, _ := filepath.Abs(file)
			extra := []string{"LOOPDETECT_STORAGE_DIR=" + t.TempDir(), "LOOP_TIER2_TOKEN=test-tier2-token-0123456789abcdef"}
			run := func(env []string) (string, error) {
				cmd := execValidate(bin, abs)
				cmd.Env = env
				out, err := cmd.CombinedOutput()
				return string(out), err
			}
			if out, err := run(withoutEnv("", extra...)); err != nil {
				t.Fatalf("validate with the key set: %v\n%s", err, out)
			}
			out, err := run(withoutEnv("LOOPDETECT_DIGEST_KEY", extra...))
			if err == nil {
				t.Fatalf("validate accepted %s without LOOPDETECT_DIGEST_KEY:\n%s", name, out)
			}
			for _, want := range []string{"require_digest_key", "LOOPDETECT_DIGEST_KEY"} {
				if !strings.Contains(out, want) {
					t.Errorf("the error does not name %s:\n%s", want, out)
				}
			}
		})
	}
}
