package main

import "syscall"

// agentProcAttr starts the agent in its own process group, as cred, with
// a parent-death signal: a supervisor that dies uncleanly (kill -9, a
// crash) takes its agent down with it, so no agent runs on unwatched with
// a hook that asks nobody, or whoever took the supervisor's port.
func agentProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred, Pdeathsig: syscall.SIGKILL}
}
