package agentcli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/webhookbody"
)

// The OpenAI chat completions API, as Qwen Code (auth type openai,
// OPENAI_BASE_URL ending in /v1) and OpenCode's OpenAI-compatible provider
// call it: POST <base>/chat/completions, streamed as server-sent events
// (chat.completion.chunk objects, then "data: [DONE]") when the request
// says stream, else one chat.completion. A tool call is a tool_calls entry
// of the assistant's message; the CLI answers it with a message of role
// "tool" and the call's tool_call_id in the next request. The two CLIs
// differ only in what chatDialect holds.

// chatDialect is what one CLI needs of the chat completions server beyond
// the API itself.
type chatDialect struct {
	// modelID, when set, is listed on GET <base>/models.
	modelID string
	// callIDPrefix replaces the script's "toolu_" in the tool call ids the
	// server hands out.
	callIDPrefix string
	// failed, when set, tells from a tool message's text that the call
	// failed or was refused; without it no result is an error.
	failed func(content string) bool
}

// qwenChat is Qwen Code's dialect: the API as such.
var qwenChat = chatDialect{callIDPrefix: "toolu_"}

// StartOpenAI serves model as an OpenAI chat completions API on a free
// loopback port until the test ends; give the CLI its URL with /v1 appended
// (OPENAI_BASE_URL).
func StartOpenAI(t testing.TB, model Model) *Server {
	return start(t, model, qwenChat.serve)
}

// chatRequest is the part of a chat completions request the server reads.
type chatRequest struct {
	Model    string            `json:"model"`
	Stream   bool              `json:"stream"`
	Tools    []json.RawMessage `json:"tools"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
	} `json:"messages"`
}

// conversation collects the tool messages. Both CLIs send a tool result as
// text (a string or text parts); the supervisor's nudge comes inside it
// (Qwen Code's PostToolUse hooks append their additionalContext after a
// blank line, OpenCode's plugin appends it to the output), so the context
// is the text from the nudge on.
func (r chatRequest) conversation(failed func(string) bool) Conversation {
	var c Conversation
	for _, m := range r.Messages {
		switch m.Role {
		case "user":
			if c.Prompt == "" && len(c.Results) == 0 {
				c.Prompt = chatText(m.Content)
			}
		case "tool":
			text := chatText(m.Content)
			content, context := splitNudge(text)
			c.Results = append(c.Results, ToolResult{ID: m.ToolCallID, Content: content, Context: context,
				IsError: failed != nil && failed(text)})
		}
	}
	return c
}

// splitNudge takes the supervisor's nudge, which a PostToolUse hook
// appended to a result, out of the result's text.
func splitNudge(text string) (content, context string) {
	i := strings.Index(text, webhookbody.NudgeMarker)
	if i < 0 {
		return text, ""
	}
	return strings.TrimRight(text[:i], "\n"), text[i:]
}

// chatText is a message's content: a string, or the texts of its parts.
func chatText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var texts []string
	for _, p := range parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// serve answers one request of the CLI.
func (d chatDialect) serve(s *Server, w http.ResponseWriter, r *http.Request) {
	if d.modelID != "" && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models") {
		writeJSON(w, map[string]any{"object": "list", "data": []any{map[string]any{"id": d.modelID, "object": "model"}}})
		return
	}
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.NotFound(w, r)
		return
	}
	var req chatRequest
	if !readRequest(w, r, &req) {
		return
	}
	turn, id := Done("ok"), ""
	if len(req.Tools) > 0 {
		// Requests without tools are the CLI's side questions (such as a
		// session's title); only the agent's loop is scripted.
		turn, id = s.next(req.conversation(d.failed))
	}
	writeChatCompletion(w, req, turn, strings.Replace(id, "toolu_", d.callIDPrefix, 1))
}

// writeChatCompletion writes the assistant message for turn, streamed when
// asked.
func writeChatCompletion(w http.ResponseWriter, req chatRequest, turn Turn, id string) {
	// A real API's time: OpenCode's provider keeps it as the response's.
	created := time.Now().Unix()
	msg := map[string]any{"role": "assistant", "content": turn.Text}
	finish := "stop"
	if turn.Tool != nil {
		args, _ := json.Marshal(turn.Tool.Input)
		msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"index": 0, "id": id, "type": "function",
			"function": map[string]any{"name": turn.Tool.Name, "arguments": string(args)},
		}}}
		finish = "tool_calls"
	}
	usage := map[string]int{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
	if !req.Stream {
		writeJSON(w, map[string]any{
			"id": "chatcmpl-" + id, "object": "chat.completion", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   usage,
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	chunk := func(delta map[string]any, finish any, usage any) {
		c := map[string]any{
			"id": "chatcmpl-" + id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		}
		if usage != nil {
			c["usage"] = usage
		}
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	chunk(msg, nil, nil)
	chunk(map[string]any{}, finish, usage)
	fmt.Fprint(w, "data: [DONE]\n\n")
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
