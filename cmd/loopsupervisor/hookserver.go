//go:build unix

package main

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/otelcol-loop/otelcol-loop/cmd/loopsupervisor/internal/webhook"
)

// The agent's own hook is the first rung of the response ladder: inside the
// agent and synchronous. An agent CLI with tool hooks (Claude Code's
// PreToolUse) runs `loopsupervisor hook` before every tool call, which asks
// this supervisor whether the call may run. The verdict is never the
// supervisor's: it comes from the collector as a verified loop.warn for the
// session. The supervisor only recognises which calls repeat the loop, from
// the calls the hook reported, and blocks those with the warn's nudge, so
// the model reads why and can change course before any kill.

// Environment the supervisor gives its agent so the hook finds it.
const (
	// envHookURL is where `loopsupervisor hook` asks (http://<listen>/hook).
	envHookURL = "LOOPSUPERVISOR_HOOK_URL"
	// envHookToken authenticates the hook to this supervisor run.
	envHookToken = "LOOPSUPERVISOR_HOOK_TOKEN"
)

const (
	hookPath = "/hook"
	// hookMaxBody bounds a hook query; tool inputs beyond it are refused
	// (and the hook fails open).
	hookMaxBody = 1 << 20
	// hookMaxSessions bounds the sessions one supervisor tracks: one agent
	// run has one session, plus its subagents'.
	hookMaxSessions = 64
	// hookRecentCalls is how many of a session's last calls are compared
	// with a new one: a loop the collector calls stuck repeats within its
	// window (10 calls by default).
	hookRecentCalls = 16
	// hookHeededAfter allowed calls after a warn end its block: the model
	// changed course, and a later loop needs a new verdict.
	hookHeededAfter = 3
	// hookSessionIdle is how long a session that stopped calling still
	// counts as one with a hook (a kill for it is held for the nudge).
	hookSessionIdle = 10 * time.Minute
)

// hookDecision is the supervisor's answer to one tool call.
type hookDecision string

const (
	decisionAllow hookDecision = "allow"
	decisionBlock hookDecision = "block"
)

// hookQuery is what `loopsupervisor hook` reports of one tool call: the
// fields every agent CLI's hook input has.
type hookQuery struct {
	SessionID string          `json:"session_id"`
	ToolName  string          `json:"tool_name"`
	ToolInput json.RawMessage `json:"tool_input,omitempty"`
}

// hookAnswer is the supervisor's reply to a hookQuery.
type hookAnswer struct {
	Decision hookDecision `json:"decision"`
	// Reason is the text the model is shown with a blocked call.
	Reason string `json:"reason,omitempty"`
}

// callKey identifies a tool call by its name and its exact input.
type callKey uint64

func keyOf(q hookQuery) callKey {
	var d xxhash.Digest
	d.Reset()
	_, _ = d.WriteString(q.ToolName)
	_, _ = d.Write([]byte{0})
	var compact bytes.Buffer
	if json.Compact(&compact, q.ToolInput) == nil {
		_, _ = d.Write(compact.Bytes())
	} else {
		_, _ = d.Write(q.ToolInput)
	}
	return callKey(d.Sum64())
}

// loopWarning is the collector's verified verdict a block rests on.
type loopWarning struct {
	nudge      string
	cycleTools []string
}

// hookSession is what the supervisor knows of one agent session from its
// hook and from the collector's webhooks.
type hookSession struct {
	recent   [hookRecentCalls]callKey
	calls    int
	lastSeen time.Time
	warning  *loopWarning
	// armed is a verified kill held while the hook nudges the model.
	armed *webhook.Message
	// allowedSinceWarn counts calls let through after the warn.
	allowedSinceWarn int
	// blockedSinceWarn counts the loop's calls blocked after the warn.
	blockedSinceWarn int
}

// repeats reports whether k is one of the session's recent calls.
func (s *hookSession) repeats(k callKey) bool {
	n := min(s.calls, hookRecentCalls)
	for i := range n {
		if s.recent[i] == k {
			return true
		}
	}
	return false
}

func (s *hookSession) push(k callKey) {
	s.recent[s.calls%hookRecentCalls] = k
	s.calls++
}

// inCycle reports whether a call of tool belongs to the warned loop; a warn
// that names no tools covers every tool.
func (w *loopWarning) inCycle(tool string) bool {
	if len(w.cycleTools) == 0 {
		return true
	}
	for _, t := range w.cycleTools {
		if t == tool {
			return true
		}
	}
	return false
}

// hookBook is the supervisor's record of its agent's sessions, fed by the
// hook's queries and by verified warns and kills.
type hookBook struct {
	mu       sync.Mutex
	sessions map[string]*hookSession
	// patience is how many of the loop's calls are blocked while a kill is
	// held; the next one carries the kill out. 0 carries kills out at once.
	patience int
	// execute hands a held kill to the supervisor when the model ignored
	// the nudge.
	execute func(webhook.Message)
	logf    func(format string, a ...any)

	blocked   int // calls blocked, over the run
	withdrawn int // held kills dropped because the model changed course
}

func newHookBook(patience int, execute func(webhook.Message), logf func(string, ...any)) *hookBook {
	return &hookBook{sessions: map[string]*hookSession{}, patience: patience, execute: execute, logf: logf}
}

// session returns the record of id, creating it; when the book is full the
// session silent longest is forgotten.
func (b *hookBook) session(id string, now time.Time) *hookSession {
	if s, ok := b.sessions[id]; ok {
		return s
	}
	if len(b.sessions) >= hookMaxSessions {
		var oldest string
		var at time.Time
		for k, s := range b.sessions {
			if oldest == "" || s.lastSeen.Before(at) {
				oldest, at = k, s.lastSeen
			}
		}
		delete(b.sessions, oldest)
	}
	s := &hookSession{lastSeen: now}
	b.sessions[id] = s
	return s
}

// warn records the collector's verified verdict for a session.
func (b *hookBook) warn(sessionKey string, body webhook.Body, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.session(sessionKey, now)
	s.warning = &loopWarning{nudge: body.Nudge, cycleTools: body.Transition.CycleTools}
	s.allowedSinceWarn, s.blockedSinceWarn = 0, 0
}

// hold keeps a verified kill back while the hook nudges, when the kill's
// session has a hook that asked recently and the collector warned it. It
// reports whether it held the kill; otherwise the kill is carried out now.
func (b *hookBook) hold(msg webhook.Message, now time.Time) bool {
	if b.patience <= 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.sessions[msg.Body.Session.Key]
	if !ok || s.calls == 0 || s.warning == nil || now.Sub(s.lastSeen) > hookSessionIdle {
		return false
	}
	m := msg
	s.armed = &m
	b.logf("kill %s held: the agent's hook shows the model the nudge first (carried out after %d more blocked repeats)", msg.Body.ID, b.patience)
	return true
}

// decide answers one tool call. A session without a verified warn is never
// blocked; with one, a call that repeats one of its recent calls (of the
// loop's tools) is blocked with the nudge, and a call that does not is the
// model changing course.
func (b *hookBook) decide(q hookQuery, now time.Time) hookAnswer {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.session(q.SessionID, now)
	s.lastSeen = now
	k := keyOf(q)
	repeat := s.repeats(k)
	s.push(k)
	if s.armed != nil && !now.Before(s.armed.Body.ExpiresAt) {
		b.logf("held kill %s expired unused", s.armed.Body.ID)
		s.armed = nil
	}
	w := s.warning
	if w == nil {
		return hookAnswer{Decision: decisionAllow}
	}
	if !repeat || !w.inCycle(q.ToolName) {
		s.allowedSinceWarn++
		if s.armed != nil {
			b.withdrawn++
			b.logf("held kill %s withdrawn: the model changed course after the nudge (%s)", s.armed.Body.ID, q.ToolName)
			s.armed = nil
		}
		if s.allowedSinceWarn >= hookHeededAfter {
			s.warning = nil
		}
		return hookAnswer{Decision: decisionAllow}
	}
	s.allowedSinceWarn = 0
	s.blockedSinceWarn++
	b.blocked++
	if s.armed != nil && s.blockedSinceWarn > b.patience {
		msg := *s.armed
		s.armed = nil
		b.logf("the model repeated the blocked call %d times after the nudge: carrying out kill %s", s.blockedSinceWarn, msg.Body.ID)
		b.execute(msg)
	}
	return hookAnswer{Decision: decisionBlock, Reason: blockReason(w.nudge, q.ToolName)}
}

// blockedCalls is the number of calls the hook blocked in this run.
func (b *hookBook) blockedCalls() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.blocked
}

func blockReason(nudge, tool string) string {
	if nudge == "" {
		nudge = "You are repeating the same " + tool + " call without progress; try a different approach."
	}
	return "Blocked by loopsupervisor: this call repeats a loop the loop detector caught. " + nudge
}

// hookHandler serves the hook's queries. It needs the run's hook token:
// the answer tells whether a session is stuck, and a query moves the
// record a held kill depends on.
type hookHandler struct {
	token []byte
	book  *hookBook
	now   func() time.Time
}

var errHookQuery = errors.New("bad hook query")

func (h *hookHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(tok), h.token) != 1 {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	q, err := readHookQuery(http.MaxBytesReader(w, r.Body, hookMaxBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a := h.book.decide(q, h.now())
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(a)
}

func readHookQuery(r io.Reader) (hookQuery, error) {
	var q hookQuery
	dec := json.NewDecoder(r)
	if err := dec.Decode(&q); err != nil {
		return q, errors.Join(errHookQuery, err)
	}
	if q.SessionID == "" || q.ToolName == "" {
		return q, errors.Join(errHookQuery, errors.New("session_id and tool_name are required"))
	}
	return q, nil
}
