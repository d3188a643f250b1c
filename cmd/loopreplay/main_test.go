package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReplayMatchesGoldens: loopreplay prints exactly the golden
// transitions the processor tests check, for every scenario.
func TestReplayMatchesGoldens(t *testing.T) {
	inputs, err := filepath.Glob("../../testdata/scenarios/*/input.jsonl")
	require.NoError(t, err)
	require.NotEmpty(t, inputs)
	for _, in := range inputs {
		t.Run(filepath.Base(filepath.Dir(in)), func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := []string{in}
			if cfg := filepath.Join(filepath.Dir(in), "config.yaml"); fileExists(cfg) {
				args = append([]string{"--config", cfg}, args...)
			}
			code := run(args, nil, &out, &errOut)
			require.Equal(t, 0, code, errOut.String())
			want, err := os.ReadFile(filepath.Join(filepath.Dir(in), "transitions.golden.jsonl"))
			require.NoError(t, err)
			require.Equal(t, string(want), out.String())
		})
	}
}

func TestSeed000KillsByTheFifthIdenticalCall(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"--summary", "../../testdata/scenarios/s000-bash-loop/input.jsonl"}, nil, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Contains(t, out.String(), `"to":"stuck"`)
	require.Contains(t, out.String(), `"kill":true`)
	// 16 varied calls precede the loop: the 5th identical call is call 21.
	require.Contains(t, out.String(), `"call_index":21,`)
	require.Contains(t, errOut.String(), `"final_state": "stuck"`)
	require.Contains(t, errOut.String(), `"detection_delay_calls": 2`)
}

func TestReadsStdinAndOneDocument(t *testing.T) {
	doc, err := os.ReadFile("../../testdata/scenarios/s001-identical-search/input.jsonl")
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"-"}, bytes.NewReader(doc), &out, &errOut), errOut.String())
	require.Contains(t, out.String(), `"reason":"periodic_loop"`)

	// One pretty-printed ExportTraceServiceRequest spanning several lines.
	first := strings.SplitN(string(doc), "\n", 2)[0]
	pretty := strings.ReplaceAll(first, `,"`, ",\n  \"")
	out.Reset()
	require.Equal(t, 0, run([]string{"-"}, strings.NewReader(pretty), &out, &errOut), errOut.String())
}

func TestUnreadableInputNamesFileAndLine(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile("../../testdata/scenarios/s001-identical-search/input.jsonl")
	require.NoError(t, err)
	bad := filepath.Join(dir, "bad.jsonl")
	lines := strings.SplitN(string(good), "\n", 3)
	require.NoError(t, os.WriteFile(bad, []byte(lines[0]+"\n"+lines[1]+"\n{not json\n"), 0o600))
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"malformed line":  {[]string{bad}, bad + ":3:"},
		"missing file":    {[]string{filepath.Join(dir, "nope.jsonl")}, "nope.jsonl"},
		"no arguments":    {nil, "usage"},
		"bad config":      {[]string{"--config", filepath.Join("testdata", "bad-config.yaml"), bad}, "history_size"},
		"no config block": {[]string{"--config", filepath.Join("testdata", "no-block.yaml"), bad}, "no loop_detect block"},
	} {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			require.Equal(t, 2, run(tc.args, nil, &out, &errOut))
			require.Contains(t, errOut.String(), tc.want)
		})
	}
}

func TestConfigChangesThresholds(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"--config", "testdata/strict.yaml", "../../testdata/scenarios/s000-bash-loop/input.jsonl"}, nil, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	// kill disabled in strict.yaml's dry run: the kill is only marked.
	require.NotContains(t, out.String(), `"kill":true`)
	require.Contains(t, out.String(), `"dry_run":true`)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestRecordedVerdictsAreNotRepeated: a live collector's export already
// carries transition events; replaying it prints each verdict once.
func TestRecordedVerdictsAreNotRepeated(t *testing.T) {
	in := "../../testdata/scenarios/lease-expiry-tick/input.jsonl"
	var first, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{in}, nil, &first, &errOut), errOut.String())
	// Record what a live pipeline would have exported: the processed spans.
	recorded := filepath.Join(t.TempDir(), "recorded.jsonl")
	require.NoError(t, exportProcessed(in, recorded))
	var again bytes.Buffer
	require.Equal(t, 0, run([]string{recorded}, nil, &again, &errOut), errOut.String())
	require.Equal(t, first.String(), again.String())
}
