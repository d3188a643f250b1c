package extract

import (
	"math/rand/v2"
	"testing"
	"time"
)

// pairSpan is a span of ordered attributes (the first of a key wins, as in
// pdata) that lists them in one pass; structured values go in lazily.
type pairSpan struct {
	attrs, res []pair
}

type pair struct {
	key string
	v   Value
}

func (s pairSpan) Name() string                          { return "op" }
func (s pairSpan) Attr(key string) (Value, bool)         { return firstPair(s.attrs, key) }
func (s pairSpan) ResourceAttr(key string) (Value, bool) { return firstPair(s.res, key) }
func (s pairSpan) TraceID() [16]byte                     { return [16]byte{7} }
func (s pairSpan) SpanID() [8]byte                       { return [8]byte{1} }
func (s pairSpan) ParentSpanID() [8]byte                 { return [8]byte{} }
func (s pairSpan) Start() time.Time                      { return time.Unix(1, 0) }
func (s pairSpan) End() time.Time                        { return time.Unix(2, 0) }
func (s pairSpan) Status() (bool, string)                { return false, "" }
func (s pairSpan) EventCount() int                       { return 0 }
func (s pairSpan) EventName(int) string                  { return "" }
func (s pairSpan) EventAttr(int, string) (Value, bool)   { return Value{}, false }

func firstPair(ps []pair, key string) (Value, bool) {
	if key == "" {
		return Value{}, false // as pdata's Lookup
	}
	for _, p := range ps {
		if p.key == key {
			return p.v, true
		}
	}
	return Value{}, false
}

func (*pairSpan) ListAttrs(s pairSpan, sink *AttrSink) { listPairs(s.attrs, sink) }

func listPairs(ps []pair, sink *AttrSink) {
	for _, p := range ps {
		i := sink.Want(p.key)
		if i < 0 {
			continue
		}
		if p.v.Kind == KindStructured {
			sink.PutLazy(i)
		} else {
			sink.Put(i, p.v)
		}
	}
}

// shortcutKeys are key lists whose slots fall out of order, repeat, share
// keys across lists and include the empty key, besides the defaults.
func shortcutKeys() []Keys {
	odd := Keys{
		ToolCall:    []Match{{Key: "op", Value: "tool"}},
		ClientHints: []Match{{Key: "b", Value: "x", Client: "b=x"}, {Key: "a", Prefix: "p", Client: "a=p*"}, {Key: "b", Value: "y", Client: "b=y"}, {Key: "c", Client: "c"}},
		ToolName:    []string{"c", "a", "", "e"},
		Arguments:   []string{"d", "b", "c"},
		Result:      []string{"e", "d"},
		CallID:      []string{"a", "a", "f"},
		ErrorType:   []string{"f", "e"},
		ToolStatus:  []string{"g"},
		Session:     []string{"s2", "b", "s1"},
		Agent:       []string{"s1", "", "a"},
	}
	ordered := Keys{
		ToolCall:    []Match{{Key: "op", Value: "tool"}},
		ClientHints: []Match{{Key: "a", Value: "x", Client: "a=x"}, {Key: "a", Prefix: "p", Client: "a=p*"}, {Key: "b", Client: "b"}, {Key: "", Client: "empty"}},
		ToolName:    []string{"c", "d"},
		Session:     []string{"s1"},
		Agent:       []string{"s2"},
	}
	return []Keys{DefaultKeys(), odd, ordered}
}

// randomSpan draws attributes over keys (some repeated, some structured)
// and resource attributes over the session and agent keys.
func randomSpan(r *rand.Rand, k *Keys) pairSpan {
	var universe []string
	for _, l := range [][]string{k.ToolName, k.Arguments, k.Result, k.CallID, k.ErrorType, k.ToolStatus, k.Session, k.Agent} {
		universe = append(universe, l...)
	}
	for _, m := range k.ClientHints {
		universe = append(universe, m.Key)
	}
	values := []Value{
		{Kind: KindString, Str: "x"}, {Kind: KindString, Str: "y"}, {Kind: KindString, Str: "pq"}, {Kind: KindString},
		{Kind: KindInt, Int: 3}, {Kind: KindStructured, Str: `{"a":1}`},
	}
	s := pairSpan{attrs: []pair{{key: "op", v: Value{Kind: KindString, Str: "tool"}}}}
	for n := r.IntN(6); n > 0; n-- {
		s.attrs = append(s.attrs, pair{key: universe[r.IntN(len(universe))], v: values[r.IntN(len(values))]})
	}
	resKeys := append(append([]string{"service.name", "other"}, k.Session...), k.Agent...)
	for n := r.IntN(8); n > 0; n-- {
		s.res = append(s.res, pair{key: resKeys[r.IntN(len(resKeys))], v: values[r.IntN(len(values))]})
	}
	return s
}

// The one pass's shortcuts — the first key of a list told by its lone or
// lowest slot, the client hints taken by the slots present, the session
// and agent read from the shared resource's memo — answer as the look-ups
// key by key do.
func TestOnePassShortcutsAnswerAsLookupsKeyByKey(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for ki, keys := range shortcutKeys() {
		x := New(keys, nil)
		var sc Scratch
		var resource []pair
		for n := 0; n < 3000; n++ {
			s := randomSpan(r, &x.keys)
			if n%50 == 0 {
				sc.ShareResource() // a new resource: the memo is read again
				resource = s.res
			}
			s.res = resource // the spans of one ShareResource share it
			fast := newAttrs(x, s, &sc)
			if fast.sink == nil {
				t.Fatalf("keys %d: no one pass", ki)
			}
			slow := attrs[pairSpan]{s: s, t: &x.tab} // Span.Attr, key by key
			lists := map[string]*keyList{
				"tool_name": &x.slots.toolName, "arguments": &x.slots.args, "result": &x.slots.result, "call_id": &x.slots.callID,
				"error_type": &x.slots.errType, "tool_status": &x.slots.toolStat, "session": &x.slots.session, "agent": &x.slots.agent,
			}
			for name, l := range lists {
				v, sl, ok := fast.firstSlot(l)
				v2, sl2, ok2 := slow.firstSlotEach(l)
				if ok != ok2 || ok && (sl != sl2 || v != v2) {
					t.Fatalf("keys %d, %s of %v: one pass (%v, slot %d, %v), key by key (%v, slot %d, %v)", ki, name, s.attrs, v, sl, ok, v2, sl2, ok2)
				}
			}
			if got, want := clientHint(x, &fast, "none"), clientHint(x, &slow, "none"); got != want {
				t.Fatalf("keys %d, hints of %v: one pass %q, key by key %q", ki, s.attrs, got, want)
			}
			res := sc.resource(x)
			for name, c := range map[string]struct {
				l    *keyList
				memo *resourceFirst
			}{"session": {&x.slots.session, res.sessionMemo()}, "agent": {&x.slots.agent, res.agentMemo()}} {
				text, key, ok := fast.firstTextOrResource(c.l, c.memo)
				var text2, key2 string
				var ok2 bool
				if v, k, found := slow.first(c.l); found {
					text2, key2, ok2 = v.Text(), k, true
				} else {
					var memo resourceFirst
					text2, key2, ok2 = resourceFirstOf(s, x.tab.keys, c.l.slots, &memo)
				}
				if text != text2 || key != key2 || ok != ok2 {
					t.Fatalf("keys %d, %s of %v / %v: (%q, %q, %v), key by key (%q, %q, %v)", ki, name, s.attrs, s.res, text, key, ok, text2, key2, ok2)
				}
			}
		}
	}
}
