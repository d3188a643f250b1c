//go:build unix

package privatefile // import "github.com/otelcol-loop/otelcol-loop/exporter/privatefile"

import (
	"os"
	"syscall"
)

// groupOtherBits are the permission bits the umask always clears.
const groupOtherBits = 0o077

// restrictUmask adds group and others to the process umask, keeping any
// bit it already clears.
func restrictUmask() {
	old := syscall.Umask(groupOtherBits)
	syscall.Umask(old | groupOtherBits)
}

// fileOwner is the uid owning fi.
func fileOwner(fi os.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}
