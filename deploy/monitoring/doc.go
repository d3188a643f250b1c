// Package monitoring holds the Prometheus alerting rules (rules.yaml) and
// the Grafana dashboard (dashboard.json) for otelcol-loop's own metrics, and
// the tests that check them with promtool and against the metrics the
// components declare in their metadata.yaml.
package monitoring
