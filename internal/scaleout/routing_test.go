//go:build unix

package scaleout

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// routingAgrees says whether a gateway routing by attrs keeps together what
// a tier-2 loop_detect with session.keys keys calls one session: the
// routing attributes must be the first session keys, in the same order.
// Then an agent that declares its session key routes by it, and loop_detect
// groups by it; a routing attribute loop_detect does not know (or knows
// only after a key the gateway ignores) lets one session's records reach
// several instances.
func routingAgrees(routingKey string, attrs, keys []string) error {
	if routingKey != "attributes" {
		return fmt.Errorf("routing_key %q: log records without a trace id are scattered; want attributes", routingKey)
	}
	if len(attrs) == 0 {
		return fmt.Errorf("routing_attributes empty")
	}
	if len(keys) < len(attrs) || !slices.Equal(keys[:len(attrs)], attrs) {
		return fmt.Errorf("routing_attributes %v are not the first loop_detect session.keys %v", attrs, keys)
	}
	return nil
}

func TestRoutingAgrees(t *testing.T) {
	for _, tc := range []struct {
		name       string
		routingKey string
		attrs      []string
		keys       []string
		ok         bool
	}{
		{"same keys", "attributes", []string{"gen_ai.conversation.id", "session.id"}, []string{"gen_ai.conversation.id", "session.id"}, true},
		{"prefix of the session keys", "attributes", []string{"session.id"}, []string{"session.id", "gen_ai.conversation.id"}, true},
		{"trace id routing", "traceID", nil, []string{"session.id"}, false},
		{"no attributes", "attributes", nil, []string{"session.id"}, false},
		{"other order", "attributes", []string{"session.id", "gen_ai.conversation.id"}, []string{"gen_ai.conversation.id", "session.id"}, false},
		{"attribute loop_detect looks at second", "attributes", []string{"session.id"}, []string{"gen_ai.conversation.id", "session.id"}, false},
		{"attribute loop_detect ignores", "attributes", []string{"user.id"}, []string{"session.id"}, false},
		{"no session keys", "attributes", []string{"session.id"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := routingAgrees(tc.routingKey, tc.attrs, tc.keys); (err == nil) != tc.ok {
				t.Errorf("routingAgrees(%q, %v, %v) = %v, want ok %v", tc.routingKey, tc.attrs, tc.keys, err, tc.ok)
			}
		})
	}
}

func strs(v any) []string {
	var out []string
	for _, x := range list(v) {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// TestShippedRoutingMatchesSessionKeys: in the shipped configs, every
// gateway (config/gateway*.yaml and the Kubernetes ConfigMap) sends traces
// and logs through the load-balancing exporter routing by attributes, all
// with the same routing_attributes; and every tier-2 config (the
// Kubernetes ConfigMap, config/production.yaml, the tests' own) runs
// loop_detect on traces and logs with those attributes as its first
// session.keys.
func TestShippedRoutingMatchesSessionKeys(t *testing.T) {
	root, err := testproc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	m := loadManifests(t)
	gateways := map[string]obj{}
	files, _ := filepath.Glob(filepath.Join(root, "config", "gateway*.yaml"))
	for _, f := range files {
		gateways["config/"+filepath.Base(f)] = readYAML(t, f)
	}
	var gwCM obj
	if err := yaml.Unmarshal([]byte(str(must(t, m, "ConfigMap/otelcol-loop-gateway"), "data", "gateway.yaml")), &gwCM); err != nil {
		t.Fatal(err)
	}
	gateways["deploy/kubernetes/gateway.yaml ConfigMap"] = gwCM
	if len(gateways) < 4 {
		t.Fatalf("found gateway configs %v", gateways)
	}

	var attrs []string
	var attrsFrom string
	for name, g := range gateways {
		lb := get(g, "exporters", "load_balancing")
		if lb == nil {
			t.Errorf("%s: no load_balancing exporter", name)
			continue
		}
		a := strs(get(lb, "routing_attributes"))
		if err := routingAgrees(str(lb, "routing_key"), a, a); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if attrs == nil {
			attrs, attrsFrom = a, name
		} else if !slices.Equal(a, attrs) {
			t.Errorf("%s routes by %v, %s by %v: replicas and files must agree", name, a, attrsFrom, attrs)
		}
		for _, sig := range []string{"traces", "logs"} {
			if ex := strs(get(g, "service", "pipelines", sig, "exporters")); !slices.Equal(ex, []string{"load_balancing"}) {
				t.Errorf("%s: %s pipeline exports to %v, want [load_balancing]", name, sig, ex)
			}
		}
	}
	if attrs == nil {
		t.Fatal("no routing attributes found")
	}

	var t2CM, harness obj
	if err := yaml.Unmarshal([]byte(str(must(t, m, "ConfigMap/otelcol-loop-tier2"), "data", "otelcol-loop.yaml")), &t2CM); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(renderTier2Config(1, 2, 3, 0, 4, filepath.Join(t.TempDir(), "seen.jsonl"))), &harness); err != nil {
		t.Fatal(err)
	}
	tier2s := map[string]obj{
		"deploy/kubernetes/tier2.yaml ConfigMap": t2CM,
		"config/production.yaml":                 readYAML(t, filepath.Join(root, "config", "production.yaml")),
		"internal/scaleout tier2Config":          harness,
	}
	for name, c := range tier2s {
		var ld []string
		for id := range get(c, "processors").(obj) {
			if id == "loop_detect" || strings.HasPrefix(id, "loop_detect/") {
				ld = append(ld, id)
			}
		}
		if len(ld) == 0 {
			t.Errorf("%s: no loop_detect processor", name)
		}
		for _, id := range ld {
			if err := routingAgrees("attributes", attrs, strs(get(c, "processors", id, "session", "keys"))); err != nil {
				t.Errorf("%s: processors.%s.session.keys: %v", name, id, err)
			}
		}
		for _, sig := range []string{"traces", "logs"} {
			procs := strs(get(c, "service", "pipelines", sig, "processors"))
			if !slices.ContainsFunc(procs, func(p string) bool { return slices.Contains(ld, p) }) {
				t.Errorf("%s: the %s pipeline (processors %v) does not run loop_detect", name, sig, procs)
			}
		}
	}
}
