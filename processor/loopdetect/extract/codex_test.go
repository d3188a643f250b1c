package extract_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/pdataspan"
)

// Codex CLI 0.169.0's log events of a real run (`codex exec` on a scripted
// model, exported over OTLP/HTTP to the collector, which wrote them to its
// file): a codex.sse_event, the tool_decision of a loop call, the
// tool_result of `ls -la` and of two runs of the incident's loop
// (`date … >> loop-runs; gh issue list`, exit 127).
func TestExtractCodexCLIToolResults(t *testing.T) {
	b, err := os.ReadFile("testdata/codex-cli-0.169.0-logs.json")
	require.NoError(t, err)
	ld, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(b)
	require.NoError(t, err)
	keys := extract.DefaultKeys()
	keys.Session = []string{"gen_ai.conversation.id", "session.id", "conversation.id"} // config/local.yaml
	x := extract.New(keys, canon.NewNormalizer(canon.DefaultNormalizerConfig()))

	calls := map[string]engine.ToolCall{} // by call_id
	rl := ld.ResourceLogs().At(0)
	lrs := rl.ScopeLogs().At(0).LogRecords()
	for i := range lrs.Len() {
		lr := lrs.At(i)
		var sc extract.Scratch
		var c engine.ToolCall
		ok, _ := extract.Extract(x, pdataspan.NewLogRecord(lr, rl.Resource().Attributes()), &sc, &c)
		event, _ := lr.Attributes().Get("event.name")
		id, _ := lr.Attributes().Get("call_id")
		if event.Str() != "codex.tool_result" {
			assert.False(t, ok, "%s is no call: only the tool_result is counted", event.Str())
			continue
		}
		require.True(t, ok, "tool_result %s", id.Str())
		calls[id.Str()] = c
	}
	require.Len(t, calls, 3)
	ls, loop1, loop2 := calls["call_toolu_0000"], calls["call_toolu_0003"], calls["call_toolu_0004"]
	for _, c := range []engine.ToolCall{ls, loop1, loop2} {
		assert.Equal(t, "codex_cli", c.Client)
		assert.Equal(t, "exec_command", c.Tool)
		assert.Equal(t, "01a24c92-bb6a-73b1-b705-36588ad294bc", c.Session, "the conversation.id, which is the hook's session_id")
		assert.Equal(t, engine.ArgsJSON, c.Args, "the arguments are read")
		assert.Equal(t, engine.FingerprintResult, c.FingerprintSource, "the output is read")
		assert.False(t, c.Failed, "Codex reports success=true for a command that exits 127")
	}
	assert.Equal(t, loop1.Signature, loop2.Signature, "the loop's runs are the same call")
	assert.NotEqual(t, ls.Signature, loop1.Signature)
	assert.Equal(t, loop1.Fingerprint, loop2.Fingerprint, "the same output, though each names a new chunk id (and may name a new wall time)")
	assert.NotEqual(t, ls.Fingerprint, loop1.Fingerprint)
}

// Without the chunk id and wall time lines dropped, each run of the loop
// would read as progress; the lines are dropped only for Codex CLI.
func TestResultDropLinesOnlyForTheirClient(t *testing.T) {
	const out1 = "Chunk ID: 927c88\nWall time: 0.0000 seconds\nProcess exited with code 127\nOutput:\ngh: command not found\n"
	const out2 = "Chunk ID: 3492d9\nWall time: 0.5174 seconds\nProcess exited with code 127\nOutput:\ngh: command not found\n"
	x := extract.New(extract.DefaultKeys(), canon.NewNormalizer(canon.DefaultNormalizerConfig()))
	tests := []struct {
		name     string
		attrs    map[string]any
		wantSame bool
	}{
		{"codex cli", map[string]any{"event.name": "codex.tool_result", "tool_name": "exec_command", "arguments": `{"cmd":"gh issue list"}`, "conversation.id": "s"}, true},
		{"another client's output", map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "exec_command", "gen_ai.tool.call.arguments": `{"cmd":"gh issue list"}`}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fp := func(out string) engine.Digest {
				attrs := map[string]any{"output": out}
				for k, v := range tt.attrs {
					attrs[k] = v
				}
				c, ok := run(t, x, fakeSpan{name: "span", attrs: attrs})
				require.True(t, ok)
				require.Equal(t, engine.FingerprintResult, c.FingerprintSource)
				return c.Fingerprint
			}
			assert.Equal(t, tt.wantSame, fp(out1) == fp(out2))
		})
	}
}
