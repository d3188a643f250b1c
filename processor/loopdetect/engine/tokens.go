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

// tokenState is where a session's token count stood at its recent calls,
// allocated at the first call after the first usage arrives, so sessions
// whose agents report none pay one pointer. The count itself is the
// session's sessionUsage (table.go).
type tokenState struct {
	// marks[i % tokenMarks] is the low 32 bits of the token count when
	// call i (1-based, after deduplication) arrived; differences are exact
	// below 4G tokens. A mark never written is 0: no tokens had arrived.
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
	if e.cfg.Kill.MaxLoopTokens <= 0 {
		// Counted only, never acted on: the session is found by its key's
		// keyed hash, 64 bits, without reading it.
		if u := sh.tab.usageOf(h); u != nil {
			u.tokens += tokens
		}
		return out
	}
	// A count that may kill is added to the session whose key it is.
	s, p := sh.tab.find(key, h)
	if s == nil {
		return out
	}
	u := sh.tab.usageAt(p)
	u.tokens += tokens
	if s.state == StateStuck && s.extra != nil && !s.extra.loop.killed &&
		s.loopTokens(&s.extra.loop, u.tokens) >= e.cfg.Kill.MaxLoopTokens {
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
	ok := sh.tab.usageOf(h) != nil
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

// markTokens notes the token count, tokens, at the newest call.
func (s *session) markTokens(tokens int64) {
	if tokens == 0 {
		return // every mark is 0 until tokens arrive
	}
	if s.tok == nil {
		s.tok = &tokenState{}
	}
	s.tok.marks[s.total%tokenMarks] = uint32(tokens)
}

// tokenMark is the low 32 bits of the session's token count when call i
// arrived.
func (s *session) tokenMark(i int64) uint32 {
	if s.tok == nil {
		return 0
	}
	return s.tok.marks[i%tokenMarks]
}

// loopTokens is the tokens used since the loop began, of the session's
// tokens so far: from the call before its first one (the model call that
// chose the loop's first tool call belongs to the loop), or the oldest
// call still marked; a loop that began with the session's first call
// counts the session's tokens.
func (s *session) loopTokens(l *loopState, tokens int64) int64 {
	if tokens == 0 || l == nil || l.startIndex < 1 {
		return 0
	}
	from := l.startIndex - 1
	if from == 0 {
		// The loop is the session's start: every token counts.
		return tokens
	}
	from = max(from, s.total-tokenMarks+1)
	if from > s.total {
		return 0
	}
	return int64(uint32(tokens) - s.tokenMark(from))
}

// loopTokensKill reports whether kill.max_loop_tokens asks to kill loop,
// the session being s of shard sh.
func (e *Engine) loopTokensKill(sh *shard, s *session, l *loopState) bool {
	return e.cfg.Kill.MaxLoopTokens > 0 && s.loopTokens(l, sh.tokens(s)) >= e.cfg.Kill.MaxLoopTokens
}

// fillTokens puts the session's token counts, of tokens so far, into t.
func (s *session) fillTokens(l *loopState, tokens int64, t *Transition) {
	if tokens == 0 {
		return
	}
	t.TokensTotal = tokens
	t.TokensLoop = s.loopTokens(l, tokens)
}

// tokens is the token count of s, one of the shard's sessions.
func (sh *shard) tokens(s *session) int64 { return sh.tab.usageAt(s.pos).tokens }
