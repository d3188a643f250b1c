# Alerting tools: a real Alertmanager for the alert_sink end-to-end test and
# promtool for the Prometheus rules in deploy/monitoring. Each is built once
# with a pinned `go install` into a version-keyed directory under .tools/ and
# reused; the tests find them through ALERTMANAGER_BIN and PROMTOOL_BIN and
# fail (not skip) under CI=true when they are absent.
#
# Alertmanager v0.31.1 is the newest release that builds from the module
# proxy: v0.32.x and later embed UI assets (ui/app/dist) that the module does
# not ship. promtool takes about ten minutes cold on two cores.
ALERTMANAGER_VERSION := v0.31.1
PROMTOOL_VERSION := v0.316.0
ALERTMANAGER := $(TOOLS)/alertmanager-$(ALERTMANAGER_VERSION)/alertmanager
PROMTOOL := $(TOOLS)/promtool-$(PROMTOOL_VERSION)/promtool

.PHONY: alert-tools test-alerts

$(ALERTMANAGER):
	GOBIN=$(dir $(ALERTMANAGER)) $(GO) install github.com/prometheus/alertmanager/cmd/alertmanager@$(ALERTMANAGER_VERSION)

$(PROMTOOL):
	GOBIN=$(dir $(PROMTOOL)) $(GO) install github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL_VERSION)

alert-tools: $(ALERTMANAGER) $(PROMTOOL)
tools: alert-tools

# The unit tests of the whole repository see both binaries; the real
# Alertmanager test lives in exporter/alertsink, the rules check in
# deploy/monitoring.
test-unit: alert-tools
test-unit: export ALERTMANAGER_BIN ?= $(ALERTMANAGER)
test-unit: export PROMTOOL_BIN ?= $(PROMTOOL)

# Only the alerting tests, verbose.
test-alerts: alert-tools
	ALERTMANAGER_BIN=$(ALERTMANAGER) PROMTOOL_BIN=$(PROMTOOL) $(GO) test -count=1 -v -run 'Alertmanager|Uncertain|Rule|Queried' ./exporter/alertsink/ ./deploy/monitoring/
