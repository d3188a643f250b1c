package main

import "syscall"

// hideProcEntries makes the supervisor non-dumpable: /proc/<pid>/environ,
// /proc/<pid>/mem and ptrace are then closed to processes of the same user
// (an agent run without --agent-user), which could otherwise read the
// secrets from the supervisor's environment or memory. The agent itself is
// unaffected: execve resets the flag.
func hideProcEntries() error {
	const prSetDumpable = 4
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
