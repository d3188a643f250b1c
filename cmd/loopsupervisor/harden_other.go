//go:build unix && !linux

package main

// hideProcEntries is Linux-only (PR_SET_DUMPABLE); elsewhere run the agent
// as another user (--agent-user) to keep the secrets out of its reach.
func hideProcEntries() error { return nil }
