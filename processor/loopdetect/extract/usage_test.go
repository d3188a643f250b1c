package extract_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
)

func TestExtractUsageShapes(t *testing.T) {
	x := extract.New(extract.DefaultKeys(), canon.NewNormalizer(canon.DefaultNormalizerConfig()))
	for _, tc := range []struct {
		name   string
		attrs  map[string]any
		want   int64
		counts bool
	}{
		{"genai semconv", map[string]any{"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 1200, "gen_ai.usage.output_tokens": 300}, 1500, true},
		{"genai pre-1.27 names", map[string]any{"gen_ai.usage.prompt_tokens": 10, "gen_ai.usage.completion_tokens": 5}, 15, true},
		{"openinference", map[string]any{"openinference.span.kind": "LLM", "llm.token_count.prompt": 700, "llm.token_count.completion": 50, "llm.token_count.total": 750}, 750, true},
		{"openinference total only", map[string]any{"llm.token_count.total": 90}, 90, true},
		{"vercel step", map[string]any{"ai.operationId": "ai.generateText.doGenerate", "ai.usage.promptTokens": 40, "ai.usage.completionTokens": 2}, 42, true},
		{"numbers as strings", map[string]any{"gen_ai.usage.input_tokens": "8", "gen_ai.usage.output_tokens": "2"}, 10, true},
		{"vercel outer span sums its steps", map[string]any{"ai.operationId": "ai.generateText", "ai.usage.promptTokens": 40}, 0, false},
		{"agent span sums its model calls", map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.usage.input_tokens": 5000}, 0, false},
		{"negative count", map[string]any{"gen_ai.usage.input_tokens": -5}, 0, false},
		{"garbage", map[string]any{"gen_ai.usage.input_tokens": "many"}, 0, false},
		{"no usage", map[string]any{"gen_ai.operation.name": "chat"}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sc extract.Scratch
			u, ok := extract.ExtractUsage(x, fakeSpan{name: "chat", attrs: tc.attrs, res: map[string]any{}}, &sc)
			assert.Equal(t, tc.counts, ok)
			if tc.counts {
				assert.Equal(t, tc.want, u.Tokens)
				assert.Equal(t, "01000000000000000000000000000000", u.Session, "the trace id, like a tool call's")
			}
		})
	}
	var sc extract.Scratch
	u, ok := extract.ExtractUsage(x, fakeSpan{name: "chat", attrs: map[string]any{"gen_ai.usage.input_tokens": 3, "gen_ai.conversation.id": "conv-7"}, res: map[string]any{}}, &sc)
	if assert.True(t, ok) {
		assert.Equal(t, int64(3), u.Tokens)
	}
	_ = u
}
