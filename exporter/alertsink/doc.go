// Package alertsink implements the alert_sink exporter: it extracts
// loop_detect transition events from traces and logs, turns them into
// compact alert records before queueing, and delivers them as Standard
// Webhooks (kill requests to the agent supervisor, state alerts to an
// optional second receiver).
//
//go:generate mdatagen metadata.yaml
package alertsink // import "github.com/otelcol-loop/otelcol-loop/exporter/alertsink"
