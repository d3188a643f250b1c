//go:build unix && !linux

package main

// becomeSubreaper is Linux-only; elsewhere orphans go to init.
func becomeSubreaper() error { return nil }
