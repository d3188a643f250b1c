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
// dependent load from main memory (ref-mem-ns) measured right after it,
// and its GC cycles (internal/benchdata/reference.go). Runs are grouped
// by their figure; the references of each group say whether the machine
// was slower too.

// modeGap is the smallest jump between two sorted figures that separates
// two modes: runs within a mode vary by a few per cent.
const modeGap = 1.2

// runMode is the runs of one mode (their positions in the run, from 1),
// their figures and what was measured beside them, in run order.
type runMode struct {
	name          string
	runs          []int
	figure, ref   []float64
	refMem, ratio []float64
	gc            []float64
}

// splitModes groups runs by their figure: one mode when no jump of
// modeGap separates the sorted figures, else the runs below the largest
// jump (fast) and from it up (slow).
func splitModes(figure, ref, refMem, gc []float64) []runMode {
	if len(figure) == 0 {
		return nil
	}
	sorted := append([]float64(nil), figure...)
	sort.Float64s(sorted)
	cut, widest := math.Inf(1), modeGap
	for i := 1; i < len(sorted); i++ {
		if sorted[i-1] > 0 {
			if g := sorted[i] / sorted[i-1]; g >= widest {
				cut, widest = sorted[i], g
			}
		}
	}
	fast, slow := runMode{name: "fast"}, runMode{name: "slow"}
	for i, v := range figure {
		m := &fast
		if v >= cut {
			m = &slow
		}
		m.runs = append(m.runs, i+1)
		m.figure = append(m.figure, v)
		m.ref = append(m.ref, at(ref, i))
		m.refMem = append(m.refMem, at(refMem, i))
		m.gc = append(m.gc, at(gc, i))
		m.ratio = append(m.ratio, v/at(ref, i))
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

// modesText describes the modes of one benchmark's runs: each mode's
// runs and medians, then how much slower the slow mode's figure and
// references were than the fast mode's.
func modesText(modes []runMode, unit string, prec int) string {
	if len(modes) == 0 {
		return "not measured"
	}
	var parts []string
	for _, m := range modes {
		runs := make([]string, len(m.runs))
		for i, r := range m.runs {
			runs[i] = fmt.Sprint(r)
		}
		part := fmt.Sprintf("%s (runs %s): %s %s, arithmetic reference %s ns, memory load %s ns",
			m.name, strings.Join(runs, ", "), f(median(m.figure), prec), unit, f(median(m.ref), 1), f(median(m.refMem), 0))
		if gc := median(m.gc); !math.IsNaN(gc) {
			part += fmt.Sprintf(", %s GC cycles per 1,000 spans", f(gc, 2))
		}
		parts = append(parts, part)
	}
	if len(modes) == 2 {
		fast, slow := modes[0], modes[1]
		parts = append(parts, fmt.Sprintf("slow ÷ fast: the figure %s×, the arithmetic reference %s×, the memory load %s×",
			f(median(slow.figure)/median(fast.figure), 2), f(median(slow.ref)/median(fast.ref), 2), f(median(slow.refMem)/median(fast.refMem), 2)))
	}
	return strings.Join(parts, "; ")
}

// modes writes the section on the machine's two speeds: for each mix of
// loop_detect, its runs grouped by the reference measured beside them.
func (rp *report) modes() {
	w := rp.w
	w("### The machine's two speeds\n\n")
	w("These VMs switch between a fast and a slow speed for minutes at a time, so one run's figures can differ from the next's with the same code. Every processor run also times a fixed piece of arithmetic in the first-level cache (`ref-ns`, 2 KiB mixed into four lanes) and a chain of loads from main memory (`ref-mem-ns`, a 64 MiB ring outside the Go heap) right after it, and counts its GC cycles (`internal/benchdata/reference.go`). Runs are grouped by their figure (a jump of %.1f× or more between two sorted figures separates the modes); the references measured beside each group say whether the machine itself was slower then: the core's speed (the host's frequency, a neighbour on the same core) shows in the arithmetic reference, memory latency and traffic in the memory one. A slow mode whose references did not move is the process's own (warm-up, the placement of its data), not the machine's.\n\n", modeGap)
	w("| benchmark | runs by mode | correlation over the runs with the arithmetic / memory reference |\n|---|---|---|\n")
	type row struct {
		name, unit string
		prec       int
	}
	var rows []row
	for _, mix := range []string{"tools", "tools-fresh", "realistic", "nontool", "nontool-tracked"} {
		rows = append(rows, row{fmt.Sprintf(proc, mix, "loop_detect"), "cpu-ns/span", 0})
	}
	rows = append(rows, row{"BenchmarkObserve/canon=on", "ns/call", 0}, row{"BenchmarkCanonicalBytes/size=2KiB/api=result", "ns/byte", 2})
	for _, rw := range rows {
		r := rp.r[rw.name]
		ms := splitModes(r[rw.unit], r["ref-ns"], r["ref-mem-ns"], r["gc/kspan"])
		w("| `%s` | %s | %s / %s |\n", strings.TrimPrefix(rw.name, "Benchmark"), modesText(ms, rw.unit, rw.prec),
			f(correlation(r[rw.unit], r["ref-ns"]), 2), f(correlation(r[rw.unit], r["ref-mem-ns"]), 2))
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
