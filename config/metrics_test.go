package config_test

import (
	"fmt"
	"testing"
)

// TestOwnMetricsOnLoopbackUnlessSet: every shipped configuration (and the
// tier-2 ConfigMap) serves the collector's own Prometheus metrics on
// loopback unless the environment names another host: tier 2 and the
// gateways bound them to 0.0.0.0:8888.
func TestOwnMetricsOnLoopbackUnlessSet(t *testing.T) {
	for name, text := range shippedConfigs(t) {
		t.Run(name, func(t *testing.T) {
			o := decodeYAML(t, name, text)
			svc, _ := o["service"].(map[string]any)
			tel, _ := svc["telemetry"].(map[string]any)
			metrics, _ := tel["metrics"].(map[string]any)
			readers, _ := metrics["readers"].([]any)
			if metrics != nil && metrics["level"] != "none" && len(readers) == 0 {
				t.Fatal("no metrics reader: the collector's default one is named nowhere here")
			}
			for i, r := range readers {
				rm, _ := r.(map[string]any)
				pull, _ := rm["pull"].(map[string]any)
				exp, _ := pull["exporter"].(map[string]any)
				prom, _ := exp["prometheus"].(map[string]any)
				if prom == nil {
					continue
				}
				host := fmt.Sprint(prom["host"])
				if h := defaultHost(host + ":1"); !isLoopback(h) {
					t.Errorf("readers[%d]: host %q is %q by default, want loopback (beyond it only when a variable says so)", i, host, h)
				}
			}
		})
	}
}
