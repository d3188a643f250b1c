// Package target is the one definition of the agent process a kill must
// reach, as the detection engine learns it from telemetry and the
// collector's components pass it on. It is a leaf: the engine, the event
// format and the exporter import it, it imports nothing of theirs. The
// webhook wire format names the process differently (internal/webhookbody:
// the instance id only as a keyed digest).
package target // import "github.com/otelcol-loop/otelcol-loop/internal/target"

// Process identifies the agent process a kill must reach.
type Process struct {
	// ServiceName is service.name.
	ServiceName string `json:"service_name,omitempty"`
	// ServiceInstanceID is service.instance.id: the key a supervisor accepts
	// a kill for.
	ServiceInstanceID string `json:"service_instance_id,omitempty"`
	// PID is process.pid (0 when unknown).
	PID int64 `json:"pid,omitempty"`
	// HostName is host.name.
	HostName string `json:"host_name,omitempty"`
}
