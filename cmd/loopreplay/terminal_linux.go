package main

import (
	"os"
	"syscall"
	"unsafe"
)

// terminal says whether f is a terminal: it answers a terminal's request
// for its settings (isatty).
func terminal(f *os.File) bool {
	var t syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TCGETS, uintptr(unsafe.Pointer(&t)))
	return errno == 0
}
