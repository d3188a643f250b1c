//go:build linux && (amd64 || arm64)

package main

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestATerminalIsOne: the far end of a pseudo-terminal, what a shell's
// stderr is, is a terminal.
func TestATerminalIsOne(t *testing.T) {
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	require.NoError(t, err)
	defer ptmx.Close()
	var unlock, n uint32
	// TIOCSPTLCK and TIOCGPTN (asm-generic/ioctls.h): unlock the far end
	// and ask its number.
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), 0x40045431, uintptr(unsafe.Pointer(&unlock)))
	require.Zero(t, errno)
	_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), 0x80045430, uintptr(unsafe.Pointer(&n)))
	require.Zero(t, errno)
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	defer pts.Close()
	require.True(t, isTerminal(pts))
	require.True(t, isTerminal(ptmx))
}
