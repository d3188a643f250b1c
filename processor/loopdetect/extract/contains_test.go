package extract

import (
	"strings"
	"testing"

	"github.com/otelcol-loop/otelcol-loop/internal/webhookbody"
)

// indexBy finds what strings.Index finds, the first occurrence, whichever
// of the needle's bytes it searches for.
func TestIndexByAgreesWithIndex(t *testing.T) {
	texts := []string{``, `p`, `"inputs"`, `{"inputs":{}}`, `x"inputs`, `{"path":"input","inputs":1}`, `{"input_str":"a"}`, `"output"`, `{"pout":"output"}`, `"outpu`,
		"lorem ipsum\n" + webhookbody.NudgeMarker, webhookbody.NudgeMarker + webhookbody.NudgeMarker, webhookbody.NudgeMarker[:40], "loopsupervisor: the loop " + webhookbody.NudgeMarker[1:], `"` + webhookbody.NudgeMarker + `"`}
	needles := []struct {
		needle string
		a      int
	}{{`"inputs"`, 3}, {`"input_str"`, 3}, {`"output"`, 4}, {webhookbody.NudgeMarker, nudgeAnchor}, {webhookbody.NudgeMarker, 0}, {webhookbody.NudgeMarker, len(webhookbody.NudgeMarker) - 1}}
	for _, s := range texts {
		for _, c := range needles {
			if got, want := indexBy(s, c.needle, c.a), strings.Index(s, c.needle); got != want {
				t.Errorf("indexBy(%q, %q, %d) = %d, strings.Index says %d", s, c.needle, c.a, got, want)
			}
		}
	}
	if webhookbody.NudgeMarker[nudgeAnchor] != 'v' {
		t.Errorf("nudgeAnchor points at %q, not the marker's first 'v'", webhookbody.NudgeMarker[nudgeAnchor])
	}
}
