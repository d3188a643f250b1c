// Package scaleout holds the tests of the two-tier deployment
// (docs/scaling.md): the tier-1 gateway distribution (cmd/otelcol-loop-gateway,
// stock components pinned to v0.161.0) validates config/gateway*.yaml; the
// gateways' routing attributes are the first session keys of every tier-2
// config; one gateway in front of three otelcol-loop instances on loopback
// detects every loop of a mixed fleet exactly once, from spans and from
// Claude Code's log records alike, with each session's spans and records on
// one instance; stopping one instance mid-run moves its sessions to the
// others; and the Kubernetes manifests in deploy/kubernetes refer to each
// other consistently. It has no code outside its tests.
package scaleout
