package canon

import "testing"

// TestReceiptsAreVolatileAtAnyDepth: a sent message's results that differ
// only by fresh ids and times — at the top, or nested in a receipt at any
// depth — are the same result; a changed count or content is not, and a
// listed item's id stays meaning.
func TestReceiptsAreVolatileAtAnyDepth(t *testing.T) {
	n := NewNormalizer(DefaultNormalizerConfig())
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"top-level ids and a receipt's id and time",
			`{"ok":true,"messageId":"msg_1f3a","runId":"run-17b","receipt":{"id":"rcpt_1e4","ts":1764504001}}`,
			`{"ok":true,"messageId":"msg_2f3a","runId":"run-27b","receipt":{"id":"rcpt_2e4","ts":1764504002}}`, true},
		{"a receipt nested deeper",
			`{"data":{"delivery":{"receipt":{"id":"r1","at":"2026-11-30T12:00:01Z"}}},"ok":true}`,
			`{"data":{"delivery":{"receipt":{"id":"r2","at":"2026-11-30T12:00:07Z"}}},"ok":true}`, true},
		{"a list of receipts",
			`{"ok":true,"receipts":[{"id":"r1","channel":"#a"},{"id":"r2","channel":"#b"}]}`,
			`{"ok":true,"receipts":[{"id":"r3","channel":"#a"},{"id":"r4","channel":"#b"}]}`, true},
		{"a receipt spelled otherwise",
			`{"ok":true,"Receipt":{"id":"r1"}}`,
			`{"ok":true,"Receipt":{"id":"r2"}}`, true},
		{"a changed count beside the receipt",
			`{"ok":true,"count":1,"receipt":{"id":"r1"}}`,
			`{"ok":true,"count":2,"receipt":{"id":"r2"}}`, false},
		{"changed content beside the receipt",
			`{"ok":true,"latest":"build 1 passed","receipt":{"id":"r1"}}`,
			`{"ok":true,"latest":"build 2 passed","receipt":{"id":"r2"}}`, false},
		{"a listed item's id is meaning",
			`{"items":[{"id":"issue-1","title":"x"}]}`,
			`{"items":[{"id":"issue-2","title":"x"}]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := n.Result("message", tt.a), n.Result("message", tt.b)
			if (a.Digest == b.Digest) != tt.same {
				t.Fatalf("same digest = %v, want %v", a.Digest == b.Digest, tt.same)
			}
		})
	}
}

// TestSignatureMemberKeepsTheDigest: finding a shell tool's command in the
// canonical pass changes no signature.
func TestSignatureMemberKeepsTheDigest(t *testing.T) {
	n := NewNormalizer(DefaultNormalizerConfig())
	for _, args := range []string{
		`{"command":"sleep 30 && gh run view 4242","description":"Wait","request_id":"r-1"}`,
		`{"description":"Wait","cmd":"make status"}`,
		`{"inputs":{"command":"ls"},"input_str":"ls","tags":[],"metadata":{}}`,
		`"{\"command\":\"ls\"}"`,
		`not json at all`,
		`{"command": ["bash", "-lc", "sleep 5"]}`,
	} {
		d, q := n.Signature("Bash", args, true)
		dm, qm, member, found := n.SignatureMember("Bash", args, true, "command")
		if d != dm || q != qm {
			t.Fatalf("%s: SignatureMember gives %x/%v, Signature %x/%v", args, dm, qm, d, q)
		}
		t.Logf("%s: member %q found %v", args, member, found)
	}
	_, _, member, found := n.SignatureMember("exec_command", `{"description":"Wait","cmd":"make status"}`, true, "cmd")
	if !found || member != `"make status"` {
		t.Fatalf("member %q found %v", member, found)
	}
}
