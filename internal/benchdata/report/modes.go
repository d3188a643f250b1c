package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// The VMs `make bench` runs on switch between a fast and a slow speed for
// minutes at a time; a median over a run's -count then hides which of the
// two each figure came from. Every processor run reports, beside its own
// figures, the time of a fixed piece of arithmetic (ref-ns) and of a
// dependent load from main memory (ref-mem-ns) measured right after it
// (internal/benchdata/reference.go). A run's mode is read from those.

// modeGap is the smallest jump between two sorted reference timings that
// separates two modes: the references themselves vary by a few per cent
// within a mode, the modes were 1.5–1.7× apart.
const modeGap = 1.2

// runMode is the runs of one mode: their figures and the references
// measured beside them, in run order.
type runMode struct {
	name          string
	figure, ref   []float64
	refMem, ratio []float64
	gc            []float64
}

// splitModes groups runs by their arithmetic reference: one mode when no
// gap of modeGap separates the sorted timings, else the runs below the
// largest gap (fast) and above it (slow). Runs without a reference are
// left out.
func splitModes(figure, ref, refMem, gc []float64) []runMode {
	type run struct{ figure, ref, refMem, gc float64 }
	var runs []run
	for i := range figure {
		if i >= len(ref) || !(ref[i] > 0) {
			continue
		}
		runs = append(runs, run{figure[i], ref[i], at(refMem, i), at(gc, i)})
	}
	if len(runs) == 0 {
		return nil
	}
	sorted := make([]float64, len(runs))
	for i, r := range runs {
		sorted[i] = r.ref
	}
	sort.Float64s(sorted)
	cut, widest := math.Inf(1), modeGap
	for i := 1; i < len(sorted); i++ {
		if g := sorted[i] / sorted[i-1]; g >= widest {
			cut, widest = sorted[i], g
		}
	}
	fast, slow := runMode{name: "fast"}, runMode{name: "slow"}
	for _, r := range runs {
		m := &fast
		if r.ref >= cut {
			m = &slow
		}
		m.figure = append(m.figure, r.figure)
		m.ref = append(m.ref, r.ref)
		m.refMem = append(m.refMem, r.refMem)
		m.gc = append(m.gc, r.gc)
		m.ratio = append(m.ratio, r.figure/r.ref)
	}
	if len(slow.figure) == 0 {
		fast.name = "one mode"
		return []runMode{fast}
	}
	return []runMode{fast, slow}
}

// at is vs[i], NaN past its end.
func at(vs []float64, i int) float64 {
	if i < len(vs) {
		return vs[i]
	}
	return math.NaN()
}

// median of vs, NaN when empty.
func median(vs []float64) float64 {
	return results{"": {"": vs}}.med("", "")
}

// modesText describes the modes of one benchmark's runs in a sentence.
func modesText(modes []runMode, unit string) string {
	if len(modes) == 0 {
		return "no reference measured"
	}
	var parts []string
	for _, m := range modes {
		parts = append(parts, fmt.Sprintf("%s: %d runs, %s %s, %s GC cycles per 1,000 spans (reference %s ns arithmetic, %s ns a memory load; %s× the arithmetic reference)",
			m.name, len(m.figure), f(median(m.figure), 0), unit, f(median(m.gc), 2), f(median(m.ref), 1), f(median(m.refMem), 0), f(median(m.ratio), 1)))
	}
	return strings.Join(parts, "; ")
}

// modes writes the section on the machine's two speeds: for each mix of
// loop_detect, its runs grouped by the reference measured beside them.
func (rp *report) modes() {
	w := rp.w
	w("### The machine's two speeds\n\n")
	w("These VMs switch between a fast and a slow speed for minutes at a time, so one run's figures can differ from the next's with the same code. Every processor run also times a fixed piece of arithmetic in the first-level cache (`ref-ns`, 2 KiB mixed into four lanes) and a chain of loads from main memory (`ref-mem-ns`, a 64 MiB ring outside the Go heap) right after it (`internal/benchdata/reference.go`). Runs are grouped by the arithmetic reference (a jump of %.1f× or more between two sorted timings separates the modes); a figure divided by its reference stays put when only the machine changed. The last column says which of the two moves with the figure in this run: the core's speed (the host's frequency, a neighbour on the same core) shows in the arithmetic reference, page placement and memory traffic in the memory one; GC cycles are counted per run beside them.\n\n", modeGap)
	w("| mix (loop_detect) | runs by mode | correlation over the runs with the arithmetic / memory reference |\n|---|---|---|\n")
	for _, mix := range []string{"tools", "tools-fresh", "realistic", "nontool", "nontool-tracked"} {
		r := rp.r[fmt.Sprintf(proc, mix, "loop_detect")]
		ms := splitModes(r["cpu-ns/span"], r["ref-ns"], r["ref-mem-ns"], r["gc/kspan"])
		w("| %s | %s | %s / %s |\n", mix, modesText(ms, "cpu-ns/span"),
			f(correlation(r["cpu-ns/span"], r["ref-ns"]), 2), f(correlation(r["cpu-ns/span"], r["ref-mem-ns"]), 2))
	}
	w("\n")
}

// correlation is Pearson's r of the pairs (a[i], b[i]), NaN with fewer
// than three pairs or no spread.
func correlation(a, b []float64) float64 {
	n := min(len(a), len(b))
	if n < 3 {
		return math.NaN()
	}
	var ma, mb float64
	for i := range n {
		ma += a[i]
		mb += b[i]
	}
	ma, mb = ma/float64(n), mb/float64(n)
	var sab, saa, sbb float64
	for i := range n {
		da, db := a[i]-ma, b[i]-mb
		sab += da * db
		saa += da * da
		sbb += db * db
	}
	if saa == 0 || sbb == 0 {
		return math.NaN()
	}
	return sab / math.Sqrt(saa*sbb)
}
