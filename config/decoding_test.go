package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/otelcol-loop/otelcol-loop/internal/deploygen"
)

// TestReceiversBoundDecoding: every OTLP receiver of every shipped
// configuration (config/*.yaml and the tier-2 ConfigMap; the Helm and
// Operator forms are generated from them) caps gRPC messages and HTTP
// bodies no looser than the collector the reliability suite measures
// (internal/reliability/testdata/collector.yaml), and every HTTP receiver
// of the otelcol-loop distribution refuses deep JSON with decode_guard.
// The stock gateway build has no decode_guard (docs/security.md).
func TestReceiversBoundDecoding(t *testing.T) {
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
	m, err := deploygen.Manifests(root)
	if err != nil {
		t.Fatal(err)
	}
	if configs["tier-2 ConfigMap"], err = deploygen.Tier2Config(m); err != nil {
		t.Fatal(err)
	}
	measured, err := os.ReadFile(filepath.Join(root, "internal", "reliability", "testdata", "collector.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ref := otlpReceivers(t, string(measured))["otlp"]
	maxMsg, _ := deploygen.Get(ref, "grpc", "max_recv_msg_size_mib").(int)
	maxBody, _ := deploygen.Get(ref, "http", "max_request_body_size").(int)
	if maxMsg == 0 || maxBody == 0 {
		t.Fatalf("the reliability suite's collector sets no max_recv_msg_size_mib / max_request_body_size: %v", ref)
	}
	for name, text := range configs {
		gateway := strings.Contains(name, "gateway")
		for id, protocols := range otlpReceivers(t, text) {
			if g := deploygen.Get(protocols, "grpc"); g != nil {
				if v, _ := deploygen.Get(g, "max_recv_msg_size_mib").(int); v < 1 || v > maxMsg {
					t.Errorf("%s: receivers::%s::protocols::grpc::max_recv_msg_size_mib is %v, want 1..%d", name, id, deploygen.Get(g, "max_recv_msg_size_mib"), maxMsg)
				}
			}
			h := deploygen.Get(protocols, "http")
			if h == nil {
				continue
			}
			if v, _ := deploygen.Get(h, "max_request_body_size").(int); v < 1 || v > maxBody {
				t.Errorf("%s: receivers::%s::protocols::http::max_request_body_size is %v, want 1..%d", name, id, deploygen.Get(h, "max_request_body_size"), maxBody)
			}
			guarded := false
			for _, mw := range deploygen.List(h, "middlewares") {
				guarded = guarded || strings.HasPrefix(deploygen.Str(mw, "id"), "decode_guard")
			}
			if !guarded && !gateway {
				t.Errorf("%s: receivers::%s::protocols::http has no decode_guard middleware", name, id)
			}
		}
	}
}

// otlpReceivers returns the protocols of each otlp receiver in a config.
func otlpReceivers(t *testing.T, text string) map[string]any {
	t.Helper()
	var cfg deploygen.Obj
	if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	rs, _ := cfg["receivers"].(deploygen.Obj)
	for id := range rs {
		if id == "otlp" || strings.HasPrefix(id, "otlp/") {
			out[id] = deploygen.Get(rs, id, "protocols")
		}
	}
	return out
}
