// Package privatefile is the otelcol-loop distribution's `file` exporter:
// the contrib file exporter, whose output is private to the collector's
// user. Traces and logs written there carry each agent's
// service.instance.id, the capability a supervisor accepts a kill for, and
// the contrib exporter creates its file 0644 and keeps an existing file's
// mode and owner.
//
// NewFactory sets the process umask to deny group and others (it is called
// when the distribution registers its components, before any configuration
// is read), so every file and directory the collector creates afterwards —
// this exporter's, file_storage's queue directories — is
// private. `rotation` is refused: the contrib rotating writer sets mode
// 0644 on every file it opens, past the umask. Before the exporter starts, an existing output file is made
// mode 0600 if the collector's user owns it and refused otherwise; after it
// started, the file is checked again.
package privatefile // import "github.com/otelcol-loop/otelcol-loop/exporter/privatefile"
