package main

import "syscall"

// becomeSubreaper makes orphaned descendants of the agent our children, so
// they can be reaped (and are not left as zombies under PID 1).
func becomeSubreaper() error {
	const prSetChildSubreaper = 36
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
