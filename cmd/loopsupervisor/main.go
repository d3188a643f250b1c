//go:build unix

// Command loopsupervisor runs an AI agent as a child in its own process
// group, receives signed kill webhooks from the alert_sink exporter on
// loopback, and stops the agent (never itself, PID 1 or anything outside
// the agent's group) when a kill for it arrives. It then writes one honest
// JSON result line and exits non-zero. A warn (the step before a kill) runs
// the optional --on-warn command with the verdict in its environment.
//
//	loopsupervisor [flags] -- AGENT_CMD ARGS...
//	loopsupervisor hook [--format claude|gemini|qwen]   (the agent CLI's tool-call hook)
//
// Exit codes:
//
//	agent's own code  the agent exited by itself (128+N when a signal N ended it)
//	2                 usage or configuration error
//	70                internal error (could not listen, could not start the agent)
//	86                the agent was stopped on a verified loop kill request
//	87                the agent was stopped by the supervisor's wall-clock backstop
//	128+N             the supervisor itself received signal N (SIGINT, SIGTERM) and stopped the agent
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "hook" {
		// The hook runs in the agent's process group, so the kill it may
		// itself set off (the last blocked repeat) reaches it too. Dying
		// before it prints the block would read to the CLI as a failed
		// hook, and a CLI fails open: it would run the very call the kill
		// is for. The hook's life is bounded by its own timeouts.
		signal.Ignore(syscall.SIGTERM)
		os.Exit(runHook(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
