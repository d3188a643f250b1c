package benchdata

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSizesAndMix(t *testing.T) {
	for _, call := range []uint64{1, 12345, 1 << 40} {
		a, r := Args("read_file", call, 200), Result(call, 500)
		if len(a) != 200 || len(r) != 500 {
			t.Fatalf("sizes %d %d", len(a), len(r))
		}
		var v any
		if err := json.Unmarshal([]byte(a), &v); err != nil {
			t.Fatalf("args not JSON: %v %s", err, a)
		}
		if err := json.Unmarshal([]byte(r), &v); err != nil {
			t.Fatalf("result not JSON: %v %s", err, r)
		}
	}
	m := Realistic()
	m.PoolBatches = 3
	w := New(m)
	if w.SpansPerBatch() != 100 || w.ToolSpansPerBatch() != 20 {
		t.Fatalf("mix %d %d", w.SpansPerBatch(), w.ToolSpansPerBatch())
	}
	tools := 0
	for _, td := range w.Batches() {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			ss := rss.At(i).ScopeSpans().At(0).Spans()
			for k := 0; k < ss.Len(); k++ {
				if v, _ := ss.At(k).Attributes().Get(AttrOperationName); v.Str() == "execute_tool" {
					tools++
				}
			}
		}
	}
	if tools != 60 {
		t.Fatalf("tool spans %d", tools)
	}
	first := w.Batches()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SpanID()
	w.Renew()
	if w.Batches()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SpanID() == first {
		t.Fatal("span ids not renewed")
	}
}

func TestSearchResultIsExactSizeJSONOfMatches(t *testing.T) {
	for _, n := range []int{200, 2048, 64 << 10} {
		for _, call := range []uint64{1, 7, 12345, 1 << 40} {
			s := SearchResult(call, n)
			if len(s) != n {
				t.Fatalf("SearchResult(%d, %d) is %d bytes", call, n, len(s))
			}
			var v struct {
				Matches []struct {
					Path string `json:"path"`
					Line int    `json:"line"`
				} `json:"matches"`
			}
			if err := json.Unmarshal([]byte(s), &v); err != nil {
				t.Fatalf("SearchResult(%d, %d) not JSON: %v %s", call, n, err, s)
			}
			if len(v.Matches) == 0 || len(v.Matches) < n/200 {
				t.Fatalf("SearchResult(%d, %d): %d matches, structure must fill it", call, n, len(v.Matches))
			}
		}
	}
}

func TestFileReadIsExactSizeJSONWithEscapedContent(t *testing.T) {
	for _, n := range []int{1024, 8 << 10, 64 << 10} {
		for _, call := range []uint64{1, 7, 12345} {
			s := FileRead(call, n)
			if len(s) != n {
				t.Fatalf("FileRead(%d, %d) is %d bytes", call, n, len(s))
			}
			var v struct {
				Content string `json:"content"`
			}
			if err := json.Unmarshal([]byte(s), &v); err != nil {
				t.Fatalf("FileRead(%d, %d) not JSON: %v %s", call, n, err, s)
			}
			if len(v.Content) < n/2 || !strings.Contains(v.Content, "\n\t") || !strings.Contains(v.Content, `"`) {
				t.Fatalf("FileRead(%d, %d): content of %d bytes lacks escapes", call, n, len(v.Content))
			}
		}
	}
}
