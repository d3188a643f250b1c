package loopdetect_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
)

// designPath is the design document whose reason table is generated from
// the engine's reason codes (engine.ReasonDocs).
const designPath = "../../docs/design.md"

// TestREADMEDesignReasonTable fails when docs/design.md's reason table is
// not what the engine says; `-run TestREADME -update` rewrites it.
func TestREADMEDesignReasonTable(t *testing.T) {
	var b strings.Builder
	b.WriteString("| state | reason | when |\n|---|---|---|\n")
	for _, d := range engine.ReasonDocs() {
		fmt.Fprintf(&b, "| %s | `%s` | %s |\n", d.State, d.Reason, d.When)
	}
	want := b.String()
	doc := readFile(t, designPath)
	got, err := section(doc, "reasons")
	require.NoError(t, err, designPath)
	if got == want {
		return
	}
	if *update {
		begin, _ := marker("reasons")
		i := strings.Index(doc, begin) + len(begin)
		require.NoError(t, os.WriteFile(designPath, []byte(doc[:i]+want+doc[i+len(got):]), 0o644))
		t.Logf("rewrote the reason table of %s", designPath)
		return
	}
	t.Errorf("%s: the reason table is not what the engine says; run\n\tgo test ./processor/loopdetect -run TestREADME -update\nand review the diff.\n%s", designPath, firstLineDiff(got, want))
}
