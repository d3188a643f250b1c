//go:build unix

package main

// The webhook server: verify, match the target, and hand a kill to run; a
// warn runs --on-warn and feeds the hook book.

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/otelcol-loop/otelcol-loop/internal/webhookbody"
	"io"
	"log"
	"math"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/otelcol-loop/otelcol-loop/cmd/loopsupervisor/internal/webhook"

	"github.com/otelcol-loop/otelcol-loop/internal/stdwebhook"
)

type supervisor struct {
	opt       options
	log       *log.Logger
	verifier  webhook.Verifier
	replay    *webhook.ReplayCache
	agent     *agent
	sessionID string
	hostname  string
	killing   atomic.Bool
	killReq   chan webhook.Message
	stdout    io.Writer
	// hooks counts running --on-warn commands; run waits for them.
	hooks sync.WaitGroup
	// book is what the agent's tool-call hook and the verified warns tell
	// of its sessions.
	book *hookBook
	// watch is whether the collector announced the agent's telemetry.
	watch *watch
	// refusals keeps the log of refused requests to a line a second.
	refusals refusalLog
}

// reply is the body of every answer. It carries nothing about the agent:
// answers go to whoever asks, signed or not, and the instance id is the
// capability a kill is matched on (docs/security.md).
type reply struct {
	Result string `json:"result"`
	Error  string `json:"error,omitempty"`
	// webhookID is the verified request's webhook-id; a 410 answer is
	// signed over it (see answer).
	webhookID string
}

func (s *supervisor) answer(w http.ResponseWriter, code int, r reply) {
	w.Header().Set("Content-Type", "application/json")
	if code == http.StatusGone && r.webhookID != "" {
		// alert_sink switches a destination off on a 410 only when it is
		// signed with the kill secret (stdwebhook.VerifyGone), so a process
		// squatting on the port cannot; an unsigned 410 is retried. The
		// reference supervisor never retires its destination
		// (docs/webhook.md); should it ever, the 410 to a verified request
		// is signed here.
		ts := time.Now().Unix()
		w.Header().Set(stdwebhook.HeaderID, r.webhookID)
		w.Header().Set(stdwebhook.HeaderTimestamp, strconv.FormatInt(ts, 10))
		w.Header().Set(stdwebhook.HeaderSignature, stdwebhook.SignGone(s.verifier.Keys, r.webhookID, ts))
	}
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(r)
}

func (s *supervisor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.answer(w, http.StatusMethodNotAllowed, reply{Result: "rejected", Error: "POST only"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, webhook.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.answer(w, http.StatusRequestEntityTooLarge, reply{Result: "rejected", Error: "body too large"})
			return
		}
		s.answer(w, http.StatusBadRequest, reply{Result: "rejected", Error: "unreadable body"})
		return
	}
	now := time.Now()
	msg, err := s.verifier.Verify(r.Header, body, now)
	if err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, webhook.ErrUnauthorized) {
			code = http.StatusUnauthorized
		}
		if line := s.refusals.note(now, "rejected webhook from %s: %v", r.RemoteAddr, err); line != "" {
			s.log.Print(line)
		}
		s.answer(w, code, reply{Result: "rejected", Error: err.Error()})
		return
	}
	if s.replay.Check(msg.WebhookID, now) {
		s.answer(w, http.StatusOK, reply{Result: "already_handled"})
		return
	}
	if msg.Body.Type == webhookbody.TypeWarn {
		s.warn(w, msg, body, now)
		return
	}
	if msg.Body.Type == webhookbody.TypeRecover {
		s.recover(w, msg, now)
		return
	}
	if msg.Body.Type == webhookbody.TypeSeen {
		s.seen(w, msg, now)
		return
	}
	if msg.Body.Type != webhookbody.TypeKill {
		s.answer(w, http.StatusOK, reply{Result: "ignored"})
		return
	}
	if !now.Before(msg.Body.ExpiresAt) {
		s.log.Printf("kill %s expired at %s; not acting", msg.Body.ID, msg.Body.ExpiresAt.Format(time.RFC3339))
		s.answer(w, http.StatusOK, reply{Result: "expired"})
		return
	}
	if !s.matches(msg.Body.Target) {
		s.answer(w, http.StatusOK, reply{Result: "not_running"})
		return
	}
	select {
	case <-s.agent.leaderDone:
		s.answer(w, http.StatusOK, reply{Result: "not_running"})
		return
	default:
	}
	if s.killing.Load() {
		s.answer(w, http.StatusOK, reply{Result: "already_handled"})
		return
	}
	if s.book.hold(msg, now) {
		s.answer(w, http.StatusOK, reply{Result: "held"})
		return
	}
	if !s.kill(msg) {
		s.answer(w, http.StatusOK, reply{Result: "already_handled"})
		return
	}
	s.answer(w, http.StatusOK, reply{Result: "killed"})
}

// kill hands a verified kill to run, once; it reports whether this call
// was the one.
func (s *supervisor) kill(msg webhook.Message) bool {
	if !s.killing.CompareAndSwap(false, true) {
		return false
	}
	s.log.Printf("verified kill %s (%s): stopping agent group %d", msg.Body.ID, msg.Body.Transition.Reason, s.agent.pid)
	s.killReq <- msg
	return true
}

// warn handles the ladder's step before a kill: it runs the --on-warn
// command, in the background so the webhook is answered at once, with the
// verdict in its environment. Without --on-warn the warn is only logged.
func (s *supervisor) warn(w http.ResponseWriter, msg webhook.Message, body []byte, now time.Time) {
	if !s.forOurAgent(w, msg, now) {
		return
	}
	s.log.Printf("verified warn %s (%s): %s", msg.Body.ID, msg.Body.Transition.Reason, msg.Body.Transition.Explanation)
	s.book.warn(msg.Body.Session.Key, msg.Body, now)
	if s.opt.onWarn == "" {
		s.answer(w, http.StatusOK, reply{Result: "warned"})
		return
	}
	env := append(agentEnv(os.Environ(), s.sessionID, "loopsupervisor-hook"),
		envVerdict+"="+string(body),
		envNudge+"="+msg.Body.Nudge,
		envReason+"="+msg.Body.Transition.Reason,
		envExplanation+"="+msg.Body.Transition.Explanation,
	)
	s.hooks.Add(1)
	go func() {
		defer s.hooks.Done()
		ctx, cancel := context.WithTimeout(context.Background(), s.opt.hookTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", s.opt.onWarn)
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			s.log.Printf("warn hook: %v", err)
		}
	}()
	s.answer(w, http.StatusOK, reply{Result: "warned"})
}

// recover handles the engine's word that a warned session left its loop:
// its nudge, its held kill and its blocks end at once.
func (s *supervisor) recover(w http.ResponseWriter, msg webhook.Message, now time.Time) {
	if !s.forOurAgent(w, msg, now) {
		return
	}
	if s.book.recover(msg.Body.Session.Key) {
		s.log.Printf("verified recovery %s (%s → %s): the hook's nudge and blocks for the session are lifted", msg.Body.ID, msg.Body.Transition.From, msg.Body.Transition.To)
	}
	s.answer(w, http.StatusOK, reply{Result: "recovered"})
}

// seen records the collector's announcement that it receives the agent's
// telemetry.
func (s *supervisor) seen(w http.ResponseWriter, msg webhook.Message, now time.Time) {
	if !s.forOurAgent(w, msg, now) {
		return
	}
	if s.watch.sawTelemetry() {
		s.log.Printf("watched: the collector receives the agent's telemetry (%s)", msg.Body.ID)
	}
	s.answer(w, http.StatusOK, reply{Result: "watched"})
}

// forOurAgent reports whether a notice is still valid and names our agent;
// otherwise it has answered it (expired, not_running).
func (s *supervisor) forOurAgent(w http.ResponseWriter, msg webhook.Message, now time.Time) bool {
	if !now.Before(msg.Body.ExpiresAt) {
		s.answer(w, http.StatusOK, reply{Result: "expired"})
		return false
	}
	if !s.matches(msg.Body.Target) {
		s.answer(w, http.StatusOK, reply{Result: "not_running"})
		return false
	}
	return true
}

// matches reports whether a notice's target is our agent. The unguessable
// service.instance.id we gave it is required, as its digest under one of
// our keys (schema 2) or, on a signed schema 1 body, as itself: a PID or
// host name is no secret (a sender can put any process.pid on its spans),
// so they may only narrow the match, never replace the id. The PID may be
// any process of the agent's group: agents that relaunch themselves (Gemini
// CLI runs its work in a child node process) or run under a wrapper (npx,
// sh -c) report a child's PID.
func (s *supervisor) matches(t webhookbody.Target) bool {
	if !t.Names(s.sessionID, s.verifier.Keys) {
		return false
	}
	if t.PID > 0 && t.PID != int64(s.agent.pid) && !inGroup(t.PID, s.agent.pid) {
		return false
	}
	return t.HostName == "" || t.HostName == s.hostname
}

// inGroup reports whether pid is a live process in process group pgid.
func inGroup(pid int64, pgid int) bool {
	if pid <= 1 || pid > math.MaxInt32 {
		return false
	}
	g, err := syscall.Getpgid(int(pid))
	return err == nil && g == pgid
}
