package engine

import (
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"
)

// tokenMarks is how many recent tool calls remember the session's token
// count when they arrived: enough for the default history (12), so the
// tokens of a loop can be counted from its first call.
const tokenMarks = 16

// tokenState is a session's model token usage, allocated when the first
// usage arrives, so sessions whose agents report none pay one pointer.
type tokenState struct {
	// total is the session's tokens so far.
	total int64
	// marks[i % tokenMarks] is the low 32 bits of total when call i (1-based,
	// after deduplication) arrived; differences are exact below 4G tokens.
	marks [tokenMarks]uint32
}

// AddTokens adds the tokens one model call of session used, at now, if the
// session is tracked (it has had a tool call). It appends the transitions
// it causes to out: a kill when the stuck loop's tokens reach
// kill.max_loop_tokens.
func (e *Engine) AddTokens(session string, tokens int64, now time.Time, out []Transition) []Transition {
	if tokens <= 0 {
		return out
	}
	key := tokenKey(session)
	sh, h := e.shardFor(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	// Only sessions with tool calls are tracked: model calls alone neither
	// create a session (a chat-only agent must not fill max_sessions) nor
	// count as activity. The tokens of the model calls before a session's
	// first tool call are not counted; a loop's are.
	s, _ := sh.tab.find(key, h)
	if s == nil {
		return out
	}
	if s.tok == nil {
		s.tok = &tokenState{}
	}
	s.tok.total += tokens
	if e.cfg.Kill.MaxLoopTokens > 0 && s.state == StateStuck && s.extra != nil && !s.extra.loop.killed &&
		s.loopTokens(&s.extra.loop) >= e.cfg.Kill.MaxLoopTokens {
		out = e.evaluate(sh, s, now.UnixNano(), TriggerTick, [8]byte{}, out)
	}
	return out
}

// Tracks reports whether session is tracked, so that AddTokens would count
// its tokens now. Only a tool call (Observe) starts tracking a session: a
// caller that finds session untracked may skip reading the usage of its
// model calls until it observes a tool call.
func (e *Engine) Tracks(session string) bool {
	key := tokenKey(session)
	sh, h := e.shardFor(key)
	sh.mu.Lock()
	s, _ := sh.tab.find(key, h)
	ok := s != nil
	sh.mu.Unlock()
	return ok
}

// tokenKey is the table key of session: a key longer than maxKept is
// replaced by its hash, so keys stay bounded.
func tokenKey(session string) string {
	if len(session) > maxKept {
		return "sha:" + strconv.FormatUint(xxhash.Sum64String(session), 16)
	}
	return session
}

// markTokens notes the token count at the newest call.
func (s *session) markTokens() {
	if s.tok != nil {
		s.tok.marks[s.total%tokenMarks] = uint32(s.tok.total)
	}
}

// loopTokens is the tokens used since the loop began: from the call before
// its first one (the model call that chose the loop's first tool call
// belongs to the loop), or the oldest call still marked; a loop that began
// with the session's first call counts the session's tokens.
func (s *session) loopTokens(l *loopState) int64 {
	if s.tok == nil || l == nil || l.startIndex < 1 {
		return 0
	}
	from := l.startIndex - 1
	if from == 0 {
		// The loop is the session's start: every token counts.
		return s.tok.total
	}
	from = max(from, s.total-tokenMarks+1)
	if from > s.total {
		return 0
	}
	return int64(uint32(s.tok.total) - s.tok.marks[from%tokenMarks])
}

// loopTokensKill reports whether kill.max_loop_tokens asks to kill loop.
func (e *Engine) loopTokensKill(s *session, l *loopState) bool {
	return e.cfg.Kill.MaxLoopTokens > 0 && s.loopTokens(l) >= e.cfg.Kill.MaxLoopTokens
}

// fillTokens puts the session's token counts into t.
func (s *session) fillTokens(l *loopState, t *Transition) {
	if s.tok == nil {
		return
	}
	t.TokensTotal = s.tok.total
	t.TokensLoop = s.loopTokens(l)
}
