//go:build unix

package alertsink // import "github.com/otelcol-loop/otelcol-loop/exporter/alertsink"

import (
	"os"
	"syscall"
)

// fileOwner is the uid owning fi.
func fileOwner(fi os.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}
