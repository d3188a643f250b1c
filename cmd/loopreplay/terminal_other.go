//go:build !linux

package main

import "os"

// terminal says whether f is a terminal; off Linux, a character device
// other than the null device is taken for one.
func terminal(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(fi, null)
}
