package main

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the root BENCHMARKS.md from docs/BENCHMARKS.md")

// The root BENCHMARKS.md is the summary of docs/BENCHMARKS.md, written by
// the same run: the same header and targets, and a link to the rest.
func TestRootBenchmarksIsTheReportsSummary(t *testing.T) {
	const root, report = "../../../BENCHMARKS.md", "docs/BENCHMARKS.md"
	full, err := os.ReadFile("../../../" + report)
	if err != nil {
		t.Fatal(err)
	}
	want := summarize(string(full), report)
	if *update {
		if err := os.WriteFile(root, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(root)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("BENCHMARKS.md is not the summary of %s: run make bench, or go test ./internal/benchdata/report -update", report)
	}
	for _, part := range []string{"# Benchmarks: the summary", "## Targets", "](" + report + ")"} {
		if !strings.Contains(want, part) {
			t.Errorf("the summary lacks %q", part)
		}
	}
	if strings.Contains(want, "### Why") || len(want) > len(full)/10 {
		t.Errorf("the summary is %d of the report's %d bytes, or has more than the targets", len(want), len(full))
	}
}
