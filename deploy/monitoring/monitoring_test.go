package monitoring

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// The rules load in Prometheus (promtool check rules) and each fires on the
// series it is meant for (promtool test rules with rules_test.yaml).
func TestRulesPassPromtool(t *testing.T) {
	promtool := testproc.RequireTool(t, "PROMTOOL_BIN", "alert-tools")
	for _, args := range [][]string{
		{"check", "rules", "rules.yaml"},
		{"test", "rules", "rules_test.yaml"},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

// Every alert in rules.yaml has a promtool test that expects it to fire.
func TestEveryRuleHasAFiringTest(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, "rules.yaml", &rules)
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, "rules_test.yaml", &tests)
	fires := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			}
		}
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			assert.True(t, fires[r.Alert], "alert %s has no test that expects it to fire", r.Alert)
		}
	}
	require.NotZero(t, n)
}

// otelcolSeries finds the collector's series names in PromQL text.
var otelcolSeries = regexp.MustCompile(`\botelcol_[a-z0-9_]+`)

// Every series the rules and the dashboard query is a metric a component
// declares in its metadata.yaml: a renamed metric breaks this test, not the
// on-call's dashboard.
func TestEveryQueriedMetricIsDeclared(t *testing.T) {
	declared := declaredMetrics(t)
	used := map[string][]string{}

	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, "rules.yaml", &rules)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			names := otelcolSeries.FindAllString(r.Expr, -1)
			require.NotEmpty(t, names, "rule %s queries no otelcol_ series", r.Alert)
			for _, n := range names {
				used[n] = append(used[n], "rule "+r.Alert)
			}
		}
	}

	raw, err := os.ReadFile("dashboard.json")
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	require.NotEmpty(t, dash.Panels)
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, tg := range p.Targets {
			names := otelcolSeries.FindAllString(tg.Expr, -1)
			require.NotEmpty(t, names, "panel %q queries no otelcol_ series", p.Title)
			for _, n := range names {
				used[n] = append(used[n], "panel "+p.Title)
			}
		}
	}

	for series, where := range used {
		assert.True(t, declared[metricOf(series)], "%s (used by %s) is not declared in any metadata.yaml", series, strings.Join(where, ", "))
	}
}

// metricOf maps a Prometheus series name to the metadata.yaml metric: the
// collector exports otelcol_<name>, histograms as _bucket, _sum, _count.
func metricOf(series string) string {
	name := strings.TrimPrefix(series, "otelcol_")
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		name = strings.TrimSuffix(name, suffix)
	}
	return name
}

func declaredMetrics(t *testing.T) map[string]bool {
	t.Helper()
	root, err := testproc.RepoRoot()
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join(root, "*", "*", "metadata.yaml"))
	require.NoError(t, err)
	out := map[string]bool{}
	for _, f := range files {
		var md struct {
			Telemetry struct {
				Metrics map[string]any `yaml:"metrics"`
			} `yaml:"telemetry"`
		}
		readYAML(t, f, &md)
		for k := range md.Telemetry.Metrics {
			out[k] = true
		}
	}
	keys := make([]string, 0, len(out))
	for k := range out {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	require.Contains(t, keys, "loopdetect_transitions", "metadata.yaml files not found under %s", root)
	require.Contains(t, keys, "alertsink_webhook_requests")
	return out
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(raw, v), path)
}
