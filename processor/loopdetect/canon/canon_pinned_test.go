package canon_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/otelcol-loop/otelcol-loop/internal/benchdata"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
)

// pinnedDocs are documents of every shape the canonical digest reads:
// formatting, volatile keys in their spellings, escapes, wrappers,
// embedded JSON, terminal states, malformed and too deep input, long keys
// and strings, and the benchmark workloads.
func pinnedDocs() []string {
	return []string{
		``, `   `, `{}`, `[]`, `null`, `"x"`, `42`, `ls -la `,
		`{"a":1,"b":[1,2]}`, `{"b":[1,2],"a":1}`,
		"  {\n\"a\": 1 ,\t\"b\" : [ true , false , null ] }  ",
		`{"q":"  x "}`, `{"q":"x","page":null}`,
		`{"q":"x","request_id":"1"}`, `{"q":"x","RequestID":"2","Request-Id":3,"req.id":4}`,
		`{"q":{"v":1,"timestamp":"a","TS":2,"t_s":3}}`,
		`{"q":1,"langgraph_step":3,"LangGraph.Node":"n","checkpoint_ns":"c","checkpoint":1}`,
		`{"q":"a\"b\\c\/d\n\t\r\b\f\u0022\u00e9\ud83d\ude00\udc00\ud83dx"}`,
		`"{\"q\":\"x\",\"request_id\":\"r\"}"`,
		`{"input_str":"x","inputs":{"q":1},"metadata":{"langgraph_step":1},"tags":["a"]}`,
		`{"args":[],"kwargs":{"q":1}}`, `{"args":[1],"kwargs":{"q":1}}`, `{"inputs":{"q":1},"tags":["a"]}`,
		`{"arguments":"{\"b\":1,\"request_id\":\"r1\"}","more":" [1, {\"a\":null}] "}`,
		`{"state":"complete","payload":{"x":1}}`, `{"task":{"status":"Succeeded"}}`,
		`{"a":{"b":{"c":{"status":"done"}}}}`, `{"state":"running"}`, `{"Job-State":" DONE "}`,
		`{"lc":1,"type":"constructor","id":["langchain","schema","messages","ToolMessage"],"kwargs":{"content":"42 rows","tool_call_id":"call_a","id":"m1"}}`,
		`{"lc":1,"id":["ToolMessage"],"kwargs":{"content":{"status":"done","pid":7},"tool_call_id":"x"}}`,
		`{"a":`, `{"a":1,}`, `[1,2`, `{"a" 1}`, `{"a":tru}`, `{"a":-}`, `{"a":1e5e5}`, `{"a":"\q"}`, `{"a":"\u12"}`, "{\"q\":\"\xff\xfe\"}",
		"{\"a\":\"\x01\x1f\"}", `{"":1,"_":2,"__":3,"-.":4}`, `{"\u0073tatus":"done"}`,
		`{"duration_ms":3,"ok":true,"pid":12,"elapsed":1.5,"cwd":"/tmp","Etag":"x"}`,
		`{"nested":{"deep":{"deeper":[1,2.5,-3e2,{"x":[[],[[]],{}]}]}}}`,
		strings.Repeat("[", 64) + strings.Repeat("]", 64), strings.Repeat("[", 65) + strings.Repeat("]", 65),
		strings.Repeat(`{"a":`, 64) + "1" + strings.Repeat("}", 64), strings.Repeat(`{"a":`, 65) + "1" + strings.Repeat("}", 65),
		`{"long":"` + strings.Repeat(`line with \"quotes\" and \\ backslashes\n`, 20) + `"}`,
		`{"` + strings.Repeat("k", 70) + `":1,"` + strings.Repeat("k", 16) + `":2,"` + strings.Repeat("k", 17) + `":3}`,
		`{"text":"lorem ipsum dolor sit amet consectetur adipiscing elit","n":12345678901234567890}`,
		benchdata.Args("read_file", 7, 200), benchdata.Result(7, 500),
		benchdata.SearchResult(7, 200), benchdata.SearchResult(7, 2048), benchdata.SearchResult(7, 64<<10),
	}
}

// pinnedDigests are the digests of pinnedDocs, in order.
var pinnedDigests = []struct {
	sig      uint64
	quality  canon.ArgsQuality
	result   uint64
	terminal bool
	opaque   bool
}{
	{0xff6c91117080afde, 0, 0x2848d6a4a7b28bc1, false, false},
	{0xff6c91117080afde, 0, 0x2848d6a4a7b28bc1, false, false},
	{0x64b7257e435237fc, 0, 0xb39362cb946013e3, false, false},
	{0xe519a8bda6151798, 0, 0x323def0871273387, false, false},
	{0x269055127dfa994b, 1, 0xf1b412a7aac8bd54, false, true},
	{0xdbef30abd1cc9a7c, 0, 0xccb771e06febe63, false, false},
	{0x897997cc314fe3b6, 1, 0x5e5dd079e67dc7a9, false, true},
	{0x4c1d0a8639e3927c, 1, 0x9b394d33eed1b663, false, true},
	{0xb69ef1be45c3d0cd, 0, 0x61bab60b92f1f4d2, false, false},
	{0xb69ef1be45c3d0cd, 0, 0x61bab60b92f1f4d2, false, false},
	{0xac23fbe95ed29779, 0, 0x7b07bc5c89e0b366, false, false},
	{0xb060f280fea90433, 0, 0x6744b535299b202c, false, false},
	{0xb060f280fea90433, 0, 0x6744b535299b202c, false, false},
	{0xb060f280fea90433, 0, 0x6744b535299b202c, false, false},
	{0xb060f280fea90433, 0, 0x6744b535299b202c, false, false},
	{0x8ff361ec28cae0c0, 0, 0x58d72659fff8c4df, false, false},
	{0x49674049292db9a6, 0, 0x9e4307fcfe1f9db9, false, false},
	{0xe548fa372d19dea3, 0, 0x326cbd82fa2bfabc, false, false},
	{0xb060f280fea90433, 0, 0x6744b535299b202c, false, false},
	{0x49674049292db9a6, 0, 0x9a70bbd205a5ca0a, false, false},
	{0x49674049292db9a6, 0, 0xe4882762ff4361c8, false, false},
	{0x9796c8412aca4bf2, 0, 0x40b28ff4fdf86fed, false, false},
	{0x57620385b81d8718, 0, 0x804644306f2fa307, false, false},
	{0x184dae209e69676d, 0, 0xcf69e995495b4372, false, false},
	{0xac7adc559c3f9084, 0, 0x7b5e9be04b0db49b, true, false},
	{0x9e1d541cd802b840, 0, 0x493913a90f309c5f, true, false},
	{0xca0601307182e01c, 0, 0x1d224685a6b0c403, false, false},
	{0x7f651e89c68bb54c, 0, 0xa841593c11b99153, false, false},
	{0xee831369288313ec, 0, 0x39a754dcffb137f3, false, false},
	{0xadb949ed8910f196, 0, 0x2a73ae108b486adf, false, false},
	{0x6a8b30464e8f869c, 0, 0x349ba94a300f3921, true, false},
	{0x5f2f7a1517e595d8, 1, 0x880b3da0c0d7b1c7, false, true},
	{0xcfa4e3cf4387ed09, 0, 0x1880a47a94b5c916, false, false},
	{0xfb6226eab1415059, 1, 0x2c46615f66737446, false, true},
	{0x77ea4ce7403aaad8, 1, 0xa0ce0b5297088ec7, false, true},
	{0x7e56e9ba80f674c8, 1, 0xa972ae0f57c450d7, false, true},
	{0xb72f6d528e02d9b7, 0, 0x600b2ae75930fda8, false, false},
	{0x2c81351da2c0ac2, 0, 0xd5ec54e40d1e2edd, false, false},
	{0x29b8f7ee52c92260, 0, 0xfe9cb05b85fb067f, false, false},
	{0xb66dc0cf03c9c14a, 1, 0x6149877ad4fbe555, false, true},
	{0xad5345d3e500a202, 0, 0x7a7702663232861d, false, false},
	{0x7bb3b09613eaff1d, 0, 0xac97f723c4d8db02, false, false},
	{0xe335d22189ea9c9f, 0, 0x341195945ed8b880, false, false},
	{0xe3bfeeffe73d1d3e, 0, 0x349ba94a300f3921, true, false},
	{0xd69dd0950a3f2407, 0, 0x6bda6a45717dae1d, false, false},
	{0x82824e78c51baaae, 0, 0x55a609cd12298eb1, false, false},
	{0x6db3dbd92993d8cf, 0, 0xba979c6cfea1fcd0, false, false},
	{0xd324fc52d53c3f74, 0, 0x400bbe7020e1b6b, false, false},
	{0xd5dc87c84a64a0bb, 0, 0x2f8c07d9d5684a4, false, false},
	{0x9487901a47489f49, 1, 0x43a3d7af907abb56, false, true},
	{0x74cce2ea5f1015bb, 0, 0xa3e8a55f882231a4, false, false},
	{0x94cca041ec041923, 0, 0x43e8e7f43b363d3c, false, false},
	{0xd87242b11bc76440, 0, 0xf560504ccf5405f, false, false},
	{0xab0cab25b55d4add, 0, 0x7c28ec90626f6ec2, false, false},
	{0x7f4252955f9076a4, 0, 0xc221c143d689cf57, false, false},
	{0x8cf07e26285c3437, 0, 0x5bd43993ff6e1028, false, false},
	{0x4d9cd2dabf134898, 0, 0x68459b42fc16b158, false, false},
	{0x469017544e6ac4f1, 0, 0xba7c1780e3653ea3, false, false},
}

// TestCanonicalDigestsArePinned: the digests of pinnedDocs are the values
// the streaming canonicalizer has produced since its format was fixed.
// Stored fingerprints and goldens depend on them, so a faster scanner must
// produce them bit for bit.
func TestCanonicalDigestsArePinned(t *testing.T) {
	want := pinnedDigests
	docs := pinnedDocs()
	if len(docs) != len(want) {
		t.Fatalf("%d documents, %d pinned digests", len(docs), len(want))
	}
	n := canon.NewNormalizer(canon.DefaultNormalizerConfig())
	for i, doc := range docs {
		t.Run(fmt.Sprintf("%d/%.24q", i, doc), func(t *testing.T) {
			sig, q := n.Signature("t", doc, true)
			if uint64(sig) != want[i].sig || q != want[i].quality {
				t.Errorf("Signature = %#x quality %d, want %#x quality %d", uint64(sig), q, want[i].sig, want[i].quality)
			}
			r := n.Result("t", doc)
			if uint64(r.Digest) != want[i].result || r.Terminal != want[i].terminal || r.Opaque != want[i].opaque {
				t.Errorf("Result = %#x terminal %v opaque %v, want %#x terminal %v opaque %v",
					uint64(r.Digest), r.Terminal, r.Opaque, want[i].result, want[i].terminal, want[i].opaque)
			}
		})
	}
}
