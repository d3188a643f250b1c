package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/replay"
)

// The progress line: an audit of a whole ~/.claude/projects takes a while,
// so on a terminal one line, redrawn in place, says how far it has come.
// Tests and pipes get clean output: a writer that is not a terminal never
// gets it, and neither does a run over within progressDelay.
const (
	// progressDelay is how long a run goes before its progress is shown.
	progressDelay = time.Second
	// progressEvery is the most often the line is redrawn.
	progressEvery = 100 * time.Millisecond
	// progressWidth bounds the line, so it does not wrap on a terminal
	// of the usual 100 columns or more.
	progressWidth = 99
)

// progressLine draws an audit's progress on a terminal.
type progressLine struct {
	w        io.Writer
	terminal bool
	now      func() time.Time
	start    time.Time
	// drawn is when the line was last drawn; shown says it is on screen.
	drawn time.Time
	shown bool
}

func newProgressLine(w io.Writer, now func() time.Time) *progressLine {
	return &progressLine{w: w, terminal: isTerminal(w), now: now, start: now()}
}

// isTerminal says whether w is a terminal (see terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && terminal(f)
}

// due says whether the line is drawn at now: on a terminal, once the run
// has lasted progressDelay, at most every progressEvery.
func (p *progressLine) due(now time.Time) bool {
	return p.terminal && now.Sub(p.start) >= progressDelay && (!p.shown || now.Sub(p.drawn) >= progressEvery)
}

// update redraws the line when it is due.
func (p *progressLine) update(pr replay.Progress) {
	now := p.now()
	if !p.due(now) {
		return
	}
	fmt.Fprint(p.w, "\r\x1b[K"+progressText(pr))
	p.drawn, p.shown = now, true
}

// clear takes the line off the screen.
func (p *progressLine) clear() {
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
}

// note writes a line of its own, above the progress line.
func (p *progressLine) note(line string) {
	p.clear()
	fmt.Fprintln(p.w, line)
}

// progressText is the line: the pass, files and megabytes done of all, and
// the file read last, its name shortened from the left to fit.
func progressText(pr replay.Progress) string {
	const mb = 1 << 20
	head := fmt.Sprintf("loopreplay: %s %d/%d files, %.1f/%.1f MB: ", pr.Phase, pr.Files, pr.Total,
		float64(pr.Bytes)/mb, float64(pr.TotalBytes)/mb)
	name := []rune(pr.Current)
	if room := progressWidth - len([]rune(head)); len(name) > room {
		name = append([]rune("…"), name[len(name)-max(room-1, 0):]...)
	}
	return head + strings.ToValidUTF8(string(name), "?")
}
