package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestNetworkConfigsAuthenticateSenders: a span can make the collector sign
// a kill, so every OTLP receiver of a config meant for a network (not
// loopback on one machine) names an authenticator that the service runs,
// and the gateway authenticates itself to tier 2.
func TestNetworkConfigsAuthenticateSenders(t *testing.T) {
	files := []string{"production.yaml", "container.yaml", "gateway.yaml", "gateway-dns.yaml", "gateway-k8s.yaml"}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			checkAuth(t, b, strings.HasPrefix(f, "gateway"))
		})
	}
	t.Run("deploy/kubernetes/tier2.yaml", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join("..", "deploy", "kubernetes", "tier2.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var cm struct {
			Data map[string]string `yaml:"data"`
		}
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		for dec.Decode(&cm) == nil {
			if c, ok := cm.Data["otelcol-loop.yaml"]; ok {
				checkAuth(t, []byte(c), false)
				return
			}
			cm.Data = nil
		}
		t.Fatal("no ConfigMap with otelcol-loop.yaml")
	})
}

func checkAuth(t *testing.T, b []byte, gateway bool) {
	t.Helper()
	var cfg struct {
		Receivers map[string]struct {
			Protocols map[string]struct {
				Auth struct {
					Authenticator string `yaml:"authenticator"`
				} `yaml:"auth"`
			} `yaml:"protocols"`
		} `yaml:"receivers"`
		Exporters map[string]struct {
			Protocol struct {
				OTLP struct {
					Headers map[string]string `yaml:"headers"`
				} `yaml:"otlp"`
			} `yaml:"protocol"`
		} `yaml:"exporters"`
		Service struct {
			Extensions []string `yaml:"extensions"`
		} `yaml:"service"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	n := 0
	for name, r := range cfg.Receivers {
		if !strings.HasPrefix(name, "otlp") {
			continue
		}
		for proto, p := range r.Protocols {
			n++
			a := p.Auth.Authenticator
			if a == "" {
				t.Errorf("receivers.%s.protocols.%s has no auth.authenticator", name, proto)
				continue
			}
			found := false
			for _, e := range cfg.Service.Extensions {
				found = found || e == a
			}
			if !found {
				t.Errorf("receivers.%s.protocols.%s: authenticator %q is not in service.extensions", name, proto, a)
			}
		}
	}
	if n == 0 {
		t.Error("no OTLP receiver protocol found")
	}
	if gateway {
		h := cfg.Exporters["load_balancing"].Protocol.OTLP.Headers["Authorization"]
		if !strings.HasPrefix(h, "Bearer ${env:") {
			t.Errorf("load_balancing sends no bearer token to tier 2 (headers.Authorization = %q)", h)
		}
	}
}
