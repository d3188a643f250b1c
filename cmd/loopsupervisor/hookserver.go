//go:build unix

package main

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"github.com/otelcol-loop/otelcol-loop/internal/webhookbody"
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
// PreToolUse, Gemini CLI's BeforeTool and AfterTool) asks this supervisor
// about every tool call, through `loopsupervisor hook` or, where the CLI
// can post a hook itself (Claude Code's HTTP hooks), directly.
//
// The supervisor keeps no loop logic of its own: the collector's engine
// decides, and the supervisor follows its verified notices. A warn (the
// session became stuck) only nudges: its text reaches the model with the
// next call, which still runs. A kill is where the engine's kill policy
// acts: held while the hook blocks the calls that repeat the loop, and
// carried out when the model keeps repeating them. A call that is not a
// repeat (an edit, a new command) is the model changing course and is
// never blocked: the result it brings is the evidence the engine needs to
// see the session recover. A recover (the engine saw new evidence) lifts
// everything at once. docs/design.md, "One detector", says why.

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
	// hookSessionIdle is how long a session that stopped calling still
	// counts as one with a hook (a kill for it is held for the nudge).
	hookSessionIdle = 10 * time.Minute
)

// hookDecision is the supervisor's answer to one tool call.
type hookDecision string

const (
	decisionAllow hookDecision = "allow"
	decisionBlock hookDecision = "block"
	// decisionNudge lets the call run and gives the model the warn's
	// nudge with it (the CLI's additionalContext).
	decisionNudge hookDecision = "nudge"
)

// eventBeforeToolGemini is Gemini CLI's pre-tool event: it cannot carry
// context to the model (0.61.0 reads additionalContext only after a tool),
// so a nudge waits for the session's next AfterTool.
const eventBeforeToolGemini = "BeforeTool"

// hookQuery is what `loopsupervisor hook` reports of one tool call: the
// fields every agent CLI's hook input has.
type hookQuery struct {
	// HookEventName is the CLI's event (PreToolUse, BeforeTool, AfterTool…).
	HookEventName string `json:"hook_event_name,omitempty"`
	SessionID     string `json:"session_id"`
	// AgentID names the subagent whose call it is (Claude Code's and Qwen
	// Code's hooks send it only from within one): a subagent is a session
	// of its own, named by its id, as the collector keys Claude Code's.
	AgentID   string          `json:"agent_id,omitempty"`
	ToolName  string          `json:"tool_name"`
	ToolInput json.RawMessage `json:"tool_input,omitempty"`
	// AfterToolContextOnly is set by `loopsupervisor hook --format qwen`:
	// the CLI drops context given before a tool, so a nudge waits for the
	// event after it.
	AfterToolContextOnly bool `json:"loopsupervisor_after_tool_context_only,omitempty"`
}

// sessionKey is the session the collector judges the call in: the
// subagent's, when a subagent makes it.
func (q hookQuery) sessionKey() string {
	if q.AgentID != "" {
		return q.AgentID
	}
	return q.SessionID
}

// afterToolContextOnlyField is hookQuery.AfterToolContextOnly's JSON name.
const afterToolContextOnlyField = "loopsupervisor_after_tool_context_only"

// hookAnswer is the supervisor's reply to a hookQuery.
type hookAnswer struct {
	Decision hookDecision `json:"decision"`
	// Reason is the text the model is shown with a blocked call, or the
	// nudge that comes with an allowed one.
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

// loopWarning is the collector's verified verdict a nudge or block rests on.
type loopWarning struct {
	nudge      string
	cycleTools []string
}

// hookSession is what the supervisor knows of one agent session from its
// hook and from the collector's notices.
type hookSession struct {
	recent   [hookRecentCalls]callKey
	calls    int
	lastSeen time.Time
	warning  *loopWarning
	// nudgePending is set by a warn until its nudge reached the model.
	nudgePending bool
	// armed is a verified kill held while the hook blocks the loop's calls.
	armed *webhook.Message
	// blockedSinceKill counts the loop's calls blocked while armed.
	blockedSinceKill int
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
	// onCall hears of every tool call the hook reports, at its time.
	onCall func(time.Time)
	called bool
}

// sawCall reports whether the hook reported any tool call.
func (b *hookBook) sawCall() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.called
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

// warn records the collector's verified verdict for a session: its nudge
// goes to the model with the session's next call. Nothing is blocked.
func (b *hookBook) warn(sessionKey string, body webhookbody.Body, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.session(sessionKey, now)
	s.warning = &loopWarning{nudge: body.Nudge, cycleTools: body.Transition.CycleTools}
	s.nudgePending = true
}

// recover ends whatever the session's warn and kill started, on the
// engine's word that the session left its loop. It reports whether there
// was anything to end.
func (b *hookBook) recover(sessionKey string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.sessions[sessionKey]
	if !ok || (s.warning == nil && s.armed == nil) {
		return false
	}
	if s.armed != nil {
		b.withdrawn++
		b.logf("held kill %s withdrawn: the collector saw the session recover", s.armed.Body.ID)
	}
	s.warning, s.armed, s.nudgePending, s.blockedSinceKill = nil, nil, false, 0
	return true
}

// hold keeps a verified kill back while the hook blocks the loop's calls,
// when the kill's session has a hook that asked recently. It reports
// whether it held the kill; otherwise the kill is carried out now.
func (b *hookBook) hold(msg webhook.Message, now time.Time) bool {
	if b.patience <= 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.sessions[msg.Body.Session.Key]
	if !ok || s.calls == 0 || now.Sub(s.lastSeen) > hookSessionIdle {
		return false
	}
	m := msg
	s.armed, s.blockedSinceKill = &m, 0
	if s.warning == nil {
		// The warn may be off (kill.warn_on: []) or still on its way.
		s.warning = &loopWarning{cycleTools: msg.Body.Transition.CycleTools}
	}
	b.logf("kill %s held: the agent's hook blocks the loop's calls first (carried out at the %d%s blocked repeat)", msg.Body.ID, b.patience+1, ordinalSuffix(b.patience+1))
	return true
}

// decide answers one hook event. Only a session whose kill is held has
// calls blocked, and only calls that repeat one of its recent calls of the
// loop's tools; any other call withdraws the held kill. A warned session's
// first event that can carry context carries its nudge.
func (b *hookBook) decide(q hookQuery, now time.Time) hookAnswer {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.session(q.sessionKey(), now)
	s.lastSeen = now
	if s.armed != nil && !now.Before(s.armed.Body.ExpiresAt) {
		b.logf("held kill %s expired unused", s.armed.Body.ID)
		s.armed = nil
	}
	if isAfterTool(q.HookEventName) {
		// The call already ran: it is not a new call, but a nudge may
		// ride on its result.
		return b.nudge(s, q)
	}
	b.called = true
	if b.onCall != nil {
		b.onCall(now)
	}
	k := keyOf(q)
	repeat := s.repeats(k)
	s.push(k)
	w := s.warning
	if s.armed == nil || w == nil {
		return b.nudge(s, q)
	}
	if !repeat || !w.inCycle(q.ToolName) {
		b.withdrawn++
		b.logf("held kill %s withdrawn: the model changed course (%s)", s.armed.Body.ID, q.ToolName)
		s.armed = nil
		return b.nudge(s, q)
	}
	s.blockedSinceKill++
	s.nudgePending = false // the block's reason carries it
	b.blocked++
	if s.blockedSinceKill > b.patience {
		msg := *s.armed
		s.armed = nil
		b.logf("the model repeated the blocked call %d times: carrying out kill %s", s.blockedSinceKill, msg.Body.ID)
		b.execute(msg)
	}
	return hookAnswer{Decision: decisionBlock, Reason: blockReason(w.nudge, q.ToolName)}
}

// nudge allows the call, with the warn's nudge when one is pending and the
// event can carry it.
func (b *hookBook) nudge(s *hookSession, q hookQuery) hookAnswer {
	if !s.nudgePending || s.warning == nil || q.HookEventName == eventBeforeToolGemini ||
		(q.AfterToolContextOnly && !isAfterTool(q.HookEventName)) {
		return hookAnswer{Decision: decisionAllow}
	}
	s.nudgePending = false
	return hookAnswer{Decision: decisionNudge, Reason: nudgeText(s.warning.nudge, q.ToolName)}
}

// isAfterTool reports an event sent after the tool ran: PostToolUseFailure
// is what Qwen Code 0.24.4 sends instead of PostToolUse when the call
// failed, e.g. a command that exited non-zero.
func isAfterTool(event string) bool {
	return event == "PostToolUse" || event == "AfterTool" || event == "PostToolUseFailure"
}

func ordinalSuffix(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return "th"
	case n%10 == 1:
		return "st"
	case n%10 == 2:
		return "nd"
	case n%10 == 3:
		return "rd"
	}
	return "th"
}

// blockedCalls is the number of calls the hook blocked in this run.
func (b *hookBook) blockedCalls() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.blocked
}

func blockReason(nudge, tool string) string {
	return webhookbody.BlockedMarker + ": this call repeats a loop the loop detector caught, and the agent is stopped if it goes on. " + orDefaultNudge(nudge, tool)
}

func nudgeText(nudge, tool string) string {
	return webhookbody.NudgeMarker + " " + orDefaultNudge(nudge, tool)
}

func orDefaultNudge(nudge, tool string) string {
	if nudge == "" {
		return "You are repeating the same " + tool + " call without progress; try a different approach."
	}
	return nudge
}

// hookHandler serves the hook's queries. It needs the run's hook token:
// the answer tells whether a session is stuck, and a query moves the
// record a held kill depends on. With format set it is the endpoint a CLI
// posts its own HTTP hook to, and answers in that CLI's output format.
type hookHandler struct {
	token  []byte
	book   *hookBook
	now    func() time.Time
	format hookFormat
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
	var out any = a
	if h.format != "" {
		out = cliOutput(h.format, q.HookEventName, a)
		if out == nil {
			out = struct{}{}
		}
	}
	body, _ := json.Marshal(out)
	if nonce := r.Header.Get(headerHookNonce); nonce != "" {
		w.Header().Set(headerHookMAC, answerMAC(h.token, nonce, body))
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
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
