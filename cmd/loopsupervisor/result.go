//go:build unix

package main

// The result line: the one honest JSON record of why the supervisor stopped
// the agent.

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"time"
)

// result is the one JSON line the supervisor writes when it stopped the agent.
type result struct {
	Status      string `json:"status"`
	Kind        string `json:"kind"`
	Reason      string `json:"reason"`
	Explanation string `json:"explanation"`
	Session     string `json:"session"`
	LoopSession string `json:"loop_session,omitempty"`
	EventID     string `json:"event_id,omitempty"`
	WebhookID   string `json:"webhook_id,omitempty"`
	DecidedAt   string `json:"decided_at,omitempty"`
	AgentPID    int    `json:"agent_pid"`
	// BlockedCalls counts the tool calls the agent's hook blocked.
	BlockedCalls int `json:"blocked_calls,omitempty"`
	// Watched says whether the collector announced the agent's telemetry
	// (loop.seen) before the run ended: false means no loop of the agent
	// could have been detected.
	Watched  bool   `json:"watched"`
	Signal   string `json:"signal"`
	ExitCode int    `json:"exit_code"`
	Time     string `json:"time"`
}

func (s *supervisor) finish(r result) {
	r.Status = "error"
	r.Session = s.sessionID
	r.AgentPID = s.agent.pid
	r.BlockedCalls = s.book.blockedCalls()
	r.Watched = s.watch.watched()
	r.Time = time.Now().UTC().Format(time.RFC3339Nano)
	line, _ := json.Marshal(r)
	line = append(line, '\n')
	if s.opt.resultFile != "" {
		// 0600: the line holds the instance id, the kill capability.
		f, err := os.OpenFile(s.opt.resultFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err == nil {
			// A file that was there before keeps its mode: make it private.
			if err = f.Chmod(0o600); err == nil {
				_, err = f.Write(line)
				_ = f.Sync()
			}
			_ = f.Close()
		}
		if err != nil {
			s.log.Printf("writing --result-file: %v; result follows on stdout", err)
			_, _ = s.stdout.Write(line)
		}
	} else {
		_, _ = s.stdout.Write(line)
	}
	if s.opt.onKill != "" {
		ctx, cancel := context.WithTimeout(context.Background(), s.opt.hookTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", s.opt.onKill)
		cmd.Env = append(agentEnv(os.Environ(), s.sessionID, ""), envResult+"="+strings.TrimSpace(string(line)))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			s.log.Printf("clean-up hook: %v", err)
		}
	}
}
