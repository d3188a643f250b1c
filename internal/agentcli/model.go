// Package agentcli runs real agent CLIs (Claude Code, Gemini CLI, Qwen
// Code, OpenCode, Codex CLI) in tests against a scripted model: a loopback
// server speaking the Anthropic Messages API, the Gemini API, the OpenAI
// chat completions API or the OpenAI Responses API (JSON and server-sent
// events) whose
// answers a Model picks from the conversation so far. The CLI then runs its real tools, hooks and
// telemetry; only the model is scripted.
package agentcli // import "github.com/otelcol-loop/otelcol-loop/internal/agentcli"

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/otelcol-loop/otelcol-loop/internal/webhookbody"
)

// ToolUse is one tool call the model asks for.
type ToolUse struct {
	// Name is the CLI's tool name (Bash, Read, Edit, Grep…).
	Name string
	// Input is the tool's input object.
	Input map[string]any
}

// Turn is the model's answer to one request: a tool call, or, when Tool is
// nil, a final text that ends the agent's turn.
type Turn struct {
	Tool *ToolUse
	Text string
}

// Bash is a turn calling the Bash tool with command.
func Bash(command string) Turn {
	return Turn{Tool: &ToolUse{Name: "Bash", Input: map[string]any{"command": command, "description": "run " + command}}}
}

// Call is a turn calling tool with input.
func Call(tool string, input map[string]any) Turn {
	return Turn{Tool: &ToolUse{Name: tool, Input: input}}
}

// Done is a turn that ends the conversation with text.
func Done(text string) Turn { return Turn{Text: text} }

// ToolResult is what the CLI sent back for one of the model's tool calls.
type ToolResult struct {
	ID      string
	Content string
	IsError bool
	// Context is the text the CLI's hooks added for the model with this
	// result (their additionalContext): Claude Code sends it as a system
	// message after the result ("PreToolUse:Bash hook additional context:
	// …"), Gemini CLI inside the result's output (<hook_context>…).
	Context string
}

// Conversation is what the model has seen: the results of its tool calls,
// in order.
type Conversation struct {
	Results []ToolResult
	// Prompt is the text of the conversation's first user message (its
	// last text block): a subagent's conversation starts with the prompt
	// of the Task call that started it, which tells a model whose
	// conversation it is answering.
	Prompt string
}

// HeardSupervisorAt is the index of the first result that carried the
// supervisor's word to the model, a blocked call or a nudge, or -1.
func (c Conversation) HeardSupervisorAt() int {
	for i, r := range c.Results {
		if strings.Contains(r.Content, webhookbody.BlockedMarker) || strings.Contains(r.Context, webhookbody.NudgeMarker) {
			return i
		}
	}
	return -1
}

// Last is the newest result, or the zero value.
func (c Conversation) Last() ToolResult {
	if len(c.Results) == 0 {
		return ToolResult{}
	}
	return c.Results[len(c.Results)-1]
}

// Model picks the next turn.
type Model interface {
	Next(c Conversation) Turn
}

// ModelFunc adapts a function to Model.
type ModelFunc func(c Conversation) Turn

// Next calls f.
func (f ModelFunc) Next(c Conversation) Turn { return f(c) }

// Script answers with its turns in order, one per request that carried a
// new tool result, then with Done.
func Script(done string, turns ...Turn) Model {
	return ModelFunc(func(c Conversation) Turn {
		if n := len(c.Results); n < len(turns) {
			return turns[n]
		}
		return Done(done)
	})
}

// Delegating is a model whose agent hands its work to a subagent: a
// conversation whose prompt holds Marker, the subagent's (its prompt is
// the one the main agent's delegating call gave it), is answered by Sub,
// every other by Main.
type Delegating struct {
	Main, Sub Model
	Marker    string
}

// Next implements Model.
func (d Delegating) Next(c Conversation) Turn {
	if strings.Contains(c.Prompt, d.Marker) {
		return d.Sub.Next(c)
	}
	return d.Main.Next(c)
}

// Server is a scripted model API on loopback: the Messages API (Start),
// the Gemini API (StartGemini), the chat completions API (StartOpenAI)
// or the Responses API (StartCodex).
type Server struct {
	// URL is the base URL to give the CLI (ANTHROPIC_BASE_URL,
	// GOOGLE_GEMINI_BASE_URL).
	URL string

	model Model
	serve func(*Server, http.ResponseWriter, *http.Request)
	mu    sync.Mutex
	log   []Exchange
	srv   *http.Server
}

// Exchange is one answered request: the conversation the model saw and
// the turn it gave.
type Exchange struct {
	Conversation Conversation
	Turn         Turn
}

// Start serves model as a Messages API on a free loopback port until the
// test ends.
func Start(t testing.TB, model Model) *Server {
	return start(t, model, (*Server).serveMessages)
}

func start(t testing.TB, model Model, serve func(*Server, http.ResponseWriter, *http.Request)) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), model: model, serve: serve}
	s.srv = &http.Server{Handler: s}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(func() { _ = s.srv.Close() })
	return s
}

// Exchanges returns the requests answered so far.
func (s *Server) Exchanges() []Exchange {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Exchange(nil), s.log...)
}

// messagesRequest is the part of a Messages API request the server reads.
type messagesRequest struct {
	Model    string            `json:"model"`
	Stream   bool              `json:"stream"`
	Tools    []json.RawMessage `json:"tools"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

type contentBlock struct {
	Type      string          `json:"type"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Text      string          `json:"text"`
}

// conversation collects the tool results of every user message.
func (r messagesRequest) conversation() Conversation {
	var c Conversation
	for i, m := range r.Messages {
		if i == 0 && m.Role == "user" {
			c.Prompt = promptOf(m.Content)
		}
		if m.Role == "system" && len(c.Results) > 0 {
			// Claude Code 2.1.332 sends its hooks' additionalContext as a
			// system message after the tool result it came with.
			c.addContext(textOf(m.Content))
			continue
		}
		var blocks []contentBlock
		if m.Role != "user" || json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		results := 0
		for _, b := range blocks {
			switch {
			case b.Type == "tool_result":
				c.Results = append(c.Results, ToolResult{ID: b.ToolUseID, Content: textOf(b.Content), IsError: b.IsError})
				results++
			case b.Type == "text" && results > 0:
				// Text after a result in the same message: what other
				// versions do with a hook's context.
				c.addContext(b.Text)
			}
		}
	}
	return c
}

// addContext adds text the CLI sent with the newest result.
func (c *Conversation) addContext(text string) {
	if text == "" {
		return
	}
	r := &c.Results[len(c.Results)-1]
	if r.Context != "" {
		r.Context += "\n"
	}
	r.Context += text
}

// promptOf is a user message's last text: the CLI puts its reminders in
// text blocks before the prompt.
func promptOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []contentBlock
	_ = json.Unmarshal(raw, &blocks)
	for i := len(blocks) - 1; i >= 0; i-- {
		if blocks[i].Type == "text" {
			return blocks[i].Text
		}
	}
	return ""
}

// textOf reads a tool result's content: a string or a list of text blocks.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []contentBlock
	_ = json.Unmarshal(raw, &blocks)
	var parts []string
	for _, b := range blocks {
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n")
}

// ServeHTTP answers one request of the Server's API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.serve(s, w, r) }

// next asks the model for its turn on conv, logs the exchange and returns
// the turn with an id for its tool call.
func (s *Server) next(conv Conversation) (Turn, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	turn := s.model.Next(conv)
	id := fmt.Sprintf("toolu_%04d", len(s.log))
	s.log = append(s.log, Exchange{Conversation: conv, Turn: turn})
	return turn, id
}

// readRequest decodes a request's JSON body into req, answering 400 when
// it cannot.
func readRequest(w http.ResponseWriter, r *http.Request, req any) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err == nil {
		err = json.Unmarshal(body, req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func (s *Server) serveMessages(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1/messages") {
		http.NotFound(w, r)
		return
	}
	var req messagesRequest
	if !readRequest(w, r, &req) {
		return
	}
	if strings.HasSuffix(r.URL.Path, "/count_tokens") {
		writeJSON(w, map[string]int{"input_tokens": 100})
		return
	}
	turn := Done("ok")
	if len(req.Tools) > 0 {
		// Requests without tools are the CLI's own side questions (titles,
		// summaries); only the agent's loop is scripted.
		var id string
		turn, id = s.next(req.conversation())
		if turn.Tool != nil {
			writeMessage(w, req, turn, id)
			return
		}
	}
	writeMessage(w, req, turn, "")
}

// writeMessage writes the assistant message for turn, streamed when asked.
func writeMessage(w http.ResponseWriter, req messagesRequest, turn Turn, toolID string) {
	content := []map[string]any{{"type": "text", "text": turn.Text}}
	stop := "end_turn"
	if turn.Tool != nil {
		content = []map[string]any{{"type": "tool_use", "id": toolID, "name": turn.Tool.Name, "input": turn.Tool.Input}}
		stop = "tool_use"
	}
	msg := map[string]any{
		"id": "msg_" + toolID, "type": "message", "role": "assistant", "model": req.Model,
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": 100, "output_tokens": 20},
	}
	if !req.Stream {
		writeJSON(w, msg)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	ev := func(typ string, data map[string]any) {
		data["type"] = typ
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
	}
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"], start["stop_reason"] = []any{}, nil
	ev("message_start", map[string]any{"message": start})
	if turn.Tool != nil {
		in, _ := json.Marshal(turn.Tool.Input)
		ev("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "tool_use", "id": toolID, "name": turn.Tool.Name, "input": map[string]any{}}})
		ev("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
	} else {
		ev("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		ev("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": turn.Text}})
	}
	ev("content_block_stop", map[string]any{"index": 0})
	ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 20}})
	ev("message_stop", map[string]any{})
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Loop is a model stuck on one call: it makes the Lead calls, then Repeat
// again and again. With Obeys it heeds the supervisor's word, a nudge that
// came with a result or a blocked call, and changes course (Then, and
// done); without, it keeps repeating. After MaxRepeats repeats it gives up
// either way, so a failing test ends.
type Loop struct {
	Lead       []Turn
	Repeat     Turn
	Obeys      bool
	Then       []Turn
	MaxRepeats int
}

// Next implements Model.
func (l Loop) Next(c Conversation) Turn {
	n := len(c.Results)
	if n < len(l.Lead) {
		return l.Lead[n]
	}
	if heardAt := c.HeardSupervisorAt(); l.Obeys && heardAt >= 0 {
		if k := n - heardAt - 1; k < len(l.Then) {
			return l.Then[k]
		}
		return Done("changed course after the loop warning")
	}
	if n-len(l.Lead) >= l.MaxRepeats {
		return Done("gave up")
	}
	return l.Repeat
}
