package canon_test

// Canonicalizer benchmarks (BENCHMARKS.md). They run only with -bench
// (make bench); none of them is a Test.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/otelcol-loop/otelcol-loop/internal/benchdata"
	"github.com/otelcol-loop/otelcol-loop/internal/benchdata/benchref"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
)

// distinct is how many different argument/result pairs the workload
// cycles through: the engine's BenchmarkObserve runs the same corpus.
const distinct = 1024

type corpus struct {
	args    []string
	results []string
}

func newCorpus() *corpus {
	c := &corpus{}
	for i := 0; i < distinct; i++ {
		tool := benchdata.Tools[i%len(benchdata.Tools)]
		c.args = append(c.args, benchdata.Args(tool, uint64(i+1), 200))
		c.results = append(c.results, benchdata.Result(uint64(i+1), 500))
	}
	return c
}

var sinkDigest uint64
var sinkString string

// baselineDigest is the textbook way: decode with encoding/json, drop the
// volatile keys, re-encode (encoding/json sorts map keys) and SHA-256 it.
func baselineDigest(doc string, deny map[string]bool) string {
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		sum := sha256.Sum256([]byte(strings.TrimSpace(doc)))
		return hex.EncodeToString(sum[:])
	}
	v = dropKeys(v, deny)
	out, _ := json.Marshal(v)
	sum := sha256.Sum256(out)
	return hex.EncodeToString(sum[:])
}

func dropKeys(v any, deny map[string]bool) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if deny[k] || x == nil {
				delete(t, k)
				continue
			}
			t[k] = dropKeys(x, deny)
		}
	case []any:
		for i := range t {
			t[i] = dropKeys(t[i], deny)
		}
	}
	return v
}

// BenchmarkCanonical compares the streaming canonical digest with the
// encoding/json + sorted re-encoding + sha256 baseline, on the workload's
// 200-byte arguments and 500-byte results.
func BenchmarkCanonical(b *testing.B) {
	c := newCorpus()
	cfg := canon.DefaultNormalizerConfig()
	norm := canon.NewNormalizer(cfg)
	deny := map[string]bool{}
	for _, k := range append(cfg.VolatileArgKeys, cfg.VolatileResultKeys...) {
		deny[k] = true
	}
	for _, doc := range []string{"args200", "result500"} {
		docs := c.args
		if doc == "result500" {
			docs = c.results
		}
		b.Run("doc="+doc+"/impl=stream-xxhash", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				d := docs[i%distinct]
				if doc == "args200" {
					sinkDigest, _ = norm.Signature("read_file", d, true)
				} else {
					sinkDigest = norm.Result("read_file", d).Digest
				}
			}
		})
		b.Run("doc="+doc+"/impl=json-sort-sha256", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				sinkString = baselineDigest(docs[i%distinct], deny)
			}
		})
	}
}

// BenchmarkCanonicalBytes is the streaming canonical digest's cost per
// JSON byte, through Normalizer.Result and Normalizer.Signature, on:
// structure-dense search results (benchdata.SearchResult: an array of match
// objects with numbers, booleans, nested objects, escapes and volatile keys)
// of 200 B, 2 KiB and 64 KiB; file-read results of 8 KiB and 64 KiB whose
// content is one long escaped string (benchdata.FileRead); and the recorded
// corpus, every tool argument and result in the recorded agent traces under
// testdata (recordedToolPayloads). The size cap is raised so the large
// documents are canonicalized, not hashed as oversized.
func BenchmarkCanonicalBytes(b *testing.B) {
	cfg := canon.DefaultNormalizerConfig()
	cfg.MaxCanonicalBytes = 1 << 20
	norm := canon.NewNormalizer(cfg)
	const docs = 64
	generated := func(gen func(uint64, int) string, n int) []string {
		corpus := make([]string, docs)
		for i := range corpus {
			corpus[i] = gen(uint64(i+1), n)
		}
		return corpus
	}
	cases := []struct {
		name   string
		corpus []string
	}{
		{"200B", generated(benchdata.SearchResult, 200)},
		{"2KiB", generated(benchdata.SearchResult, 2<<10)},
		{"64KiB", generated(benchdata.SearchResult, 64<<10)},
		{"file8KiB", generated(benchdata.FileRead, 8<<10)},
		{"file64KiB", generated(benchdata.FileRead, 64<<10)},
		{"recorded", recordedToolPayloads(b)},
	}
	for _, c := range cases {
		total := 0
		for _, d := range c.corpus {
			total += len(d)
		}
		for _, api := range []string{"result", "signature"} {
			b.Run("size="+c.name+"/api="+api, func(b *testing.B) {
				// One op is one document; ns/byte is over the corpus'
				// average document.
				avg := float64(total) / float64(len(c.corpus))
				b.SetBytes(int64(avg))
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					d := c.corpus[i%len(c.corpus)]
					if api == "result" {
						sinkDigest = norm.Result("grep", d).Digest
					} else {
						sinkDigest, _ = norm.Signature("grep", d, true)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/avg, "ns/byte")
				benchref.Report(b)
			})
		}
	}
}

// recordedPayloadKeys are the attributes in which the recorded frameworks
// put a tool call's arguments and result.
var recordedPayloadKeys = map[string]bool{
	"gen_ai.tool.call.arguments": true, "gen_ai.tool.call.result": true,
	"gcp.vertex.agent.tool_call_args": true, "gcp.vertex.agent.tool_response": true,
	"tool_input": true, "tool_parameters": true,
	"input.value": true, "output.value": true,
	"ai.toolCall.args": true, "ai.toolCall.result": true,
	"traceloop.entity.input": true, "traceloop.entity.output": true,
}

// recordedToolPayloads returns the string values of recordedPayloadKeys in
// the recorded real-agent traces and logs (the client scenarios and the
// Claude Code replay), in file order.
func recordedToolPayloads(b *testing.B) []string {
	b.Helper()
	files, err := filepath.Glob("../../../testdata/scenarios/client-*/input.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	more, err := filepath.Glob("../../../cmd/loopreplay/testdata/claude-code/*.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if k, ok := v["key"].(string); ok && recordedPayloadKeys[k] {
				if val, ok := v["value"].(map[string]any); ok {
					if s, ok := val["stringValue"].(string); ok && s != "" {
						out = append(out, s)
					}
				}
			}
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	for _, f := range append(files, more...) {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			var v any
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				b.Fatalf("%s: %v", f, err)
			}
			walk(v)
		}
	}
	if len(out) == 0 {
		b.Fatal("no recorded tool payloads found")
	}
	return out
}
