//go:build !unix

package privatefile // import "github.com/otelcol-loop/otelcol-loop/exporter/privatefile"

import "os"

// restrictUmask does nothing where there is no umask.
func restrictUmask() {}

// fileOwner reports no owner where files have no uid.
func fileOwner(os.FileInfo) (uint32, bool) { return 0, false }
