//go:build unix && !linux

package main

import "syscall"

// agentProcAttr starts the agent in its own process group, as cred. Other
// systems have no parent-death signal: there a supervisor that dies
// uncleanly leaves its agent running (docs/security.md).
func agentProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred}
}
