package engine

import (
	"testing"
	"time"
)

// tokenRun feeds a session where every tool call is preceded by one model
// call of 1,000 tokens: three distinct calls, then the same call with the
// same result until the loop is stuck.
func tokenRun(t *testing.T, e *Engine) []Transition {
	t.Helper()
	b := newBuilder("s")
	var out []Transition
	at := time.Duration(0)
	step := func(args string) {
		at += time.Second
		out = e.AddTokens("s", 1000, t0.Add(at), out)
		at += time.Second
		c := b.call(at, "read_file", args, "same content")
		if args != `{"p":"loop"}` {
			c = b.call(at, "read_file", args, "content of "+args)
		}
		out = e.Observe(c, c.End, out)
	}
	for _, a := range []string{`{"p":1}`, `{"p":2}`, `{"p":3}`, `{"p":"loop"}`, `{"p":"loop"}`} {
		step(a)
	}
	return out
}

func TestTransitionsCarryTokensOfSessionAndLoop(t *testing.T) {
	e := mustEngine(t, nil)
	out := tokenRun(t, e)
	if len(out) != 1 || out[0].To != StateStuck {
		t.Fatalf("want one transition into stuck, got %+v", out)
	}
	tr := out[0]
	if tr.TokensTotal != 4000 {
		t.Errorf("TokensTotal = %d, want 4000 (the model calls after the first tool call)", tr.TokensTotal)
	}
	if tr.TokensLoop != 2000 {
		t.Errorf("TokensLoop = %d, want 2000 (the model calls that chose the loop's two calls)", tr.TokensLoop)
	}
	// Model calls alone never create a session: a chat-only agent must not
	// fill max_sessions.
	if got := e.AddTokens("chat-only", 10, t0, nil); len(got) != 0 {
		t.Fatalf("tokens alone decided %+v", got)
	}
	if _, _, ok := e.Session("chat-only"); ok {
		t.Fatal("a session without tool calls was created by its model calls")
	}
}

func TestMaxLoopTokensKills(t *testing.T) {
	for _, tc := range []struct {
		name      string
		max       int64
		wantKill  bool
		wantAfter int // model calls after the loop is stuck
	}{
		{"off by default", 0, false, 5},
		{"kills once the loop burned the limit", 3500, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := mustEngine(t, func(c *Config) {
				c.Kill.Reasons = nil
				c.Kill.AfterLoopCalls = 0
				c.Kill.MaxLoopTokens = tc.max
			})
			if out := tokenRun(t, e); len(out) != 1 || out[0].Kill {
				t.Fatalf("want a stuck transition without kill, got %+v", out)
			}
			var kills []Transition
			for i := 1; i <= 5; i++ {
				for _, tr := range e.AddTokens("s", 1000, t0.Add(time.Minute+time.Duration(i)*time.Second), nil) {
					if tr.Kill {
						kills = append(kills, tr)
						if i != tc.wantAfter {
							t.Errorf("killed after %d model calls, want %d", i, tc.wantAfter)
						}
					}
				}
			}
			if got := len(kills) == 1; got != tc.wantKill {
				t.Fatalf("kills = %+v, want kill=%v", kills, tc.wantKill)
			}
			if tc.wantKill && kills[0].TokensLoop != 4000 {
				t.Errorf("the kill reports %d loop tokens, want 4000", kills[0].TokensLoop)
			}
		})
	}
}

func TestMaxLoopTokensValidated(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Kill.MaxLoopTokens = -1
	if err := cfg.Validate(); err == nil {
		t.Fatal("negative kill.max_loop_tokens accepted")
	}
}
