package extract

import (
	"strings"
	"testing"
)

func TestContainsByAgreesWithContains(t *testing.T) {
	for _, s := range []string{``, `p`, `"inputs"`, `{"inputs":{}}`, `x"inputs`, `{"path":"input","inputs":1}`, `{"input_str":"a"}`, `"output"`, `{"pout":"output"}`, `"outpu`} {
		for _, c := range []struct {
			needle string
			a      int
		}{{`"inputs"`, 3}, {`"input_str"`, 3}, {`"output"`, 4}} {
			if got, want := containsBy(s, c.needle, c.a), strings.Contains(s, c.needle); got != want {
				t.Errorf("containsBy(%q, %q) = %v, strings.Contains says %v", s, c.needle, got, want)
			}
		}
	}
}
