package replay

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect"
)

// An audit replays many files, say every session under ~/.claude/projects,
// through one processor without holding them all: a first pass reads each
// file to learn where it starts in time, and what it is; the second reads
// the files again in that order and feeds their calls, merged by start
// across the files open at once, so every session shares one event clock
// as in a collector. A file is held from its first call's turn to its
// last's: sessions that followed one another are held one or two at a
// time, and memory does not grow with the number of files. A file that
// cannot be read is skipped, saying why, and the others are audited.

// AuditOptions say what an audit reports as it goes.
type AuditOptions struct {
	// Page keeps each counted call for the timeline page (memory then
	// grows with the calls, a few dozen bytes each).
	Page bool
	// Stdin is read for the input "-".
	Stdin io.Reader
	// Events receives the transitions as they are made; an error stops
	// the audit.
	Events func([]loopevent.Event) error
	// Note receives one line per input skipped or read in part.
	Note func(line string)
	// Progress is told after every file of each pass.
	Progress func(Progress)
}

// Progress is how far an audit has come.
type Progress struct {
	// Phase is PhaseReading in the first pass, PhaseReplaying in the second.
	Phase Phase
	// Files and Bytes are the pass's inputs done, and Total and
	// TotalBytes all of them (bytes on disk, as read).
	Files, Total      int
	Bytes, TotalBytes int64
	// Current is the input read last.
	Current string
}

// Phase is a pass of an audit.
type Phase uint8

// The passes of an audit.
const (
	PhaseReading Phase = iota
	PhaseReplaying
)

func (p Phase) String() string {
	if p == PhaseReplaying {
		return "replaying"
	}
	return "reading"
}

// AuditResult is what an audit found.
type AuditResult struct {
	Summary Summary
	// Page is the timeline page's data, when AuditOptions.Page was set.
	Page *Page
	// Read counts the inputs read (a file read with its session, as a
	// subagent's transcript is, is not counted again); Skipped the inputs
	// and files found with them not read; ReadInPart the files read with
	// lines left out.
	Read, Skipped, ReadInPart int
	// MaxOpen is the most files held at once in the second pass.
	MaxOpen int
}

// Audit replays inputs (file names, "-" for opts.Stdin) under cfg.
// Errors are those of the processor or of opts.Events; an input that
// cannot be read is skipped and noted.
func Audit(ctx context.Context, cfg *loopdetect.Config, inputs []string, opts AuditOptions) (*AuditResult, error) {
	a := &auditor{opts: opts, seen: map[string]bool{}, total: &Input{Formats: map[string]int{}, SessionFiles: map[string]string{}},
		fileUnit: map[string]int{}, tally: newTally(opts.Page)}
	if a.opts.Note == nil {
		a.opts.Note = func(string) {}
	}
	if a.opts.Progress == nil {
		a.opts.Progress = func(Progress) {}
	}
	if a.opts.Events == nil {
		a.opts.Events = func([]loopevent.Event) error { return nil }
	}
	a.index(inputs)
	counts, err := a.replay(ctx, cfg)
	if err != nil {
		return nil, err
	}
	res := &AuditResult{Read: a.read, Skipped: len(a.skipped), ReadInPart: len(a.total.Cleanings), MaxOpen: a.maxOpen}
	a.total.skipped = a.skipped
	res.Summary = a.tally.summary(cfg, a.total, counts)
	if opts.Page {
		res.Page = a.tally.pageOf(inputs, &res.Summary)
	}
	return res, nil
}

// unit is what the replay reads as one: an input and its companions.
type unit struct {
	// index is the input's place among the inputs, which orders units
	// that start together.
	index int
	// files are the input and its companions, as the first pass read them.
	files []string
	// data is the content of an input that cannot be read twice (stdin,
	// a pipe), kept from the first pass.
	data  []byte
	start time.Time
	bytes int64
}

type auditor struct {
	opts  AuditOptions
	units []*unit
	// seen are the files read, so a subagent transcript is read once.
	seen    map[string]bool
	skipped []FileNote
	// total counts what every unit read; fileUnit is the unit whose file
	// names each session (the earliest input's).
	total    *Input
	fileUnit map[string]int
	tally    *tally
	maxOpen  int
	read     int
	eventErr error
}

// skip notes an input, or a file read with one, that is not read.
func (a *auditor) skip(name string, err error) {
	why := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		why = pe.Err.Error()
	}
	a.skipped = append(a.skipped, FileNote{File: name, Note: why})
	a.opts.Note(fmt.Sprintf("skipped %s: %s", name, why))
}

// index is the first pass: each input read, its companions found, what
// cannot be read skipped, and the units ordered by start.
func (a *auditor) index(inputs []string) {
	var totalBytes int64
	for _, name := range inputs {
		if fi, err := os.Stat(name); err == nil && name != "-" {
			totalBytes += fi.Size()
		}
	}
	var done int64
	for i, name := range inputs {
		u, err := a.first(i, name)
		switch {
		case errors.Is(err, errAlreadyRead):
		case err != nil:
			a.skip(name, err)
		default:
			a.units = append(a.units, u)
		}
		if u != nil {
			done += u.bytes
		}
		a.opts.Progress(Progress{Phase: PhaseReading, Files: i + 1, Total: len(inputs), Bytes: done, TotalBytes: max(totalBytes, done), Current: name})
	}
	sort.SliceStable(a.units, func(i, j int) bool { return a.units[i].start.Before(a.units[j].start) })
}

// errAlreadyRead is an input read earlier with its session.
var errAlreadyRead = errors.New("already read with its session")

// first reads input i in the first pass. The unit is returned, with its
// bytes, even when it cannot be read.
func (a *auditor) first(i int, name string) (*unit, error) {
	u := &unit{index: i}
	data, keep, err := a.readInput(name)
	u.bytes = int64(len(data))
	if err != nil {
		return u, err
	}
	if keep {
		// Cleaning works in place: the second pass gets the input as it came.
		u.data = append([]byte(nil), data...)
	}
	if name == "-" {
		name = "stdin" // as errors and sources name it
	}
	sc, err := a.scan(data, name, !keep)
	if err != nil || sc.already {
		return u, cmpErr(err, errAlreadyRead)
	}
	u.files, u.start = append(u.files, name), sc.start
	if keep || sc.format == nil || sc.format.companions == nil {
		return u, nil
	}
	for _, sub := range sc.format.companions(name) {
		b, err := os.ReadFile(sub)
		var ssc scanned
		if err == nil {
			if ssc, err = a.scan(b, sub, true); err == nil && ssc.already {
				continue
			}
		}
		u.bytes += int64(len(b))
		if err != nil {
			a.skip(sub, err)
			continue
		}
		u.files = append(u.files, sub)
		if ssc.start.Before(u.start) {
			u.start = ssc.start
		}
	}
	return u, nil
}

// cmpErr is err, or alt when err is nil.
func cmpErr(err, alt error) error {
	if err != nil {
		return err
	}
	return alt
}

// scanned is what the first pass learns of a file.
type scanned struct {
	// format is its session format, nil for OTLP JSON.
	format *sessionFormat
	// start is no later than its first call or request.
	start time.Time
	// already says it was read with its session.
	already bool
}

// scan is the first pass over one file: cleaned, what was left out noted,
// its format found, and its start: from a look at its timestamps where
// its format can tell one so, else by reading it whole, which also
// finds a bad line now.
func (a *auditor) scan(data []byte, name string, onDisk bool) (scanned, error) {
	data, cleaning, err := clean(data)
	if err != nil {
		return scanned{}, err
	}
	sc := scanned{format: formatOf(data)}
	if sf := sc.format; onDisk && sf != nil && sf.companions != nil {
		abs, _ := filepath.Abs(name)
		if a.seen[abs] {
			return scanned{already: true}, nil
		}
		a.seen[abs] = true
	}
	if cleaning.Any() {
		a.total.Cleanings = append(a.total.Cleanings, FileCleaning{File: name, Cleaning: cleaning})
		a.opts.Note(fmt.Sprintf("read %s in part: %s", name, joinNotes(cleaning.Notes())))
	}
	if sf := sc.format; sf != nil && sf.earliest != nil {
		var ok bool
		if sc.start, ok = sf.earliest(data); ok {
			return sc, nil
		}
	}
	in := &Input{}
	if err := in.addData(data, name, sc.format); err != nil {
		return scanned{}, err
	}
	sc.start, _ = in.start()
	return sc, nil
}

// readInput reads an input whole; keep says it cannot be read again.
func (a *auditor) readInput(name string) (data []byte, keep bool, err error) {
	if name == "-" {
		if a.opts.Stdin == nil {
			return nil, false, errors.New("no standard input")
		}
		data, err = io.ReadAll(a.opts.Stdin)
		return data, true, err
	}
	fi, err := os.Stat(name)
	if err != nil {
		return nil, false, err
	}
	if fi.IsDir() {
		return nil, false, fmt.Errorf("a directory, not a file (give the files in it, e.g. %s)", filepath.Join(name, "*.jsonl"))
	}
	data, err = os.ReadFile(name)
	return data, !fi.Mode().IsRegular(), err
}

// readUnitFile reads one file of a unit into a fresh Input, in the
// second pass (what was left out of it was noted in the first).
func readUnitFile(data []byte, name string) (*Input, error) {
	data, _, err := clean(data)
	if err != nil {
		return nil, err
	}
	in := &Input{}
	if err := in.addData(data, name, formatOf(data)); err != nil {
		return nil, err
	}
	return in, nil
}

// load reads a unit again for the second pass.
func (a *auditor) load(u *unit) (*Input, error) {
	in := &Input{Formats: map[string]int{}}
	for _, name := range u.files {
		data := u.data
		if data == nil {
			var err error
			if data, err = os.ReadFile(name); err != nil {
				return nil, err
			}
		}
		fin, err := readUnitFile(data, name)
		if err != nil {
			return nil, err
		}
		in.mergeCounts(fin)
		in.Batches = append(in.Batches, fin.Batches...)
		for i := range fin.Transcript {
			fin.Transcript[i].order = len(in.Transcript)
			in.Transcript = append(in.Transcript, fin.Transcript[i])
		}
	}
	return in, nil
}

// mergeCounts adds what o read, but its batches and calls, to in.
func (in *Input) mergeCounts(o *Input) {
	if in.Formats == nil {
		in.Formats = map[string]int{}
	}
	for k, v := range o.Formats {
		in.Formats[k] += v
	}
	in.Spans += o.Spans
	in.LogRecords += o.LogRecords
	in.OtherSignals += o.OtherSignals
	in.VerdictSpans += o.VerdictSpans
	in.TranscriptCalls += o.TranscriptCalls
	in.Cleanings = append(in.Cleanings, o.Cleanings...)
	for k, v := range o.SessionFiles {
		if in.SessionFiles == nil {
			in.SessionFiles = map[string]string{}
		}
		if in.SessionFiles[k] == "" {
			in.SessionFiles[k] = v
		}
	}
	for k, v := range o.SessionParents {
		if in.SessionParents == nil {
			in.SessionParents = map[string]SessionParent{}
		}
		if link := in.SessionParents[k]; link.ToolUseID == "" {
			in.SessionParents[k] = v
		}
	}
}

// start is the earliest start of what in read: its calls' and its
// requests' spans and log records; false when nothing has a time.
func (in *Input) start() (time.Time, bool) {
	var first time.Time
	set := false
	at := func(t time.Time) {
		if !set || t.Before(first) {
			first, set = t, true
		}
	}
	for i := range in.Transcript {
		at(in.Transcript[i].Start)
	}
	for i := range in.Batches {
		if t, ok := batchStart(&in.Batches[i]); ok {
			at(t)
		}
	}
	return first, set
}

// batchStart is the earliest span start or log record time of b.
func batchStart(b *Batch) (time.Time, bool) {
	var first pcommon.Timestamp
	at := func(ts pcommon.Timestamp) {
		if ts != 0 && (first == 0 || ts < first) {
			first = ts
		}
	}
	if b.Signal == SignalLogs {
		rls := b.Logs.ResourceLogs()
		for i := 0; i < rls.Len(); i++ {
			sls := rls.At(i).ScopeLogs()
			for j := 0; j < sls.Len(); j++ {
				lrs := sls.At(j).LogRecords()
				for k := 0; k < lrs.Len(); k++ {
					lr := lrs.At(k)
					if lr.Timestamp() != 0 {
						at(lr.Timestamp())
					} else {
						at(lr.ObservedTimestamp())
					}
				}
			}
		}
	} else {
		rss := b.Traces.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			sss := rss.At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				spans := sss.At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					at(spans.At(k).StartTimestamp())
				}
			}
		}
	}
	return first.AsTime(), first != 0
}

// cursor is an open unit in the second pass: its requests and calls in
// the order fed, and the next one.
type cursor struct {
	u     *unit
	items []item
	next  int
}

// item is one request fed: an OTLP request, or a transcript call
// rendered when its turn comes.
type item struct {
	at    time.Time
	batch *Batch
	call  *TranscriptCall
}

func (c *cursor) at() time.Time { return c.items[c.next].at }

// openUnits is a heap of cursors by their next item's time, then input.
type openUnits []*cursor

func (h openUnits) Len() int { return len(h) }
func (h openUnits) Less(i, j int) bool {
	a, b := h[i].at(), h[j].at()
	if !a.Equal(b) {
		return a.Before(b)
	}
	return h[i].u.index < h[j].u.index
}
func (h openUnits) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *openUnits) Push(x any)   { *h = append(*h, x.(*cursor)) }
func (h *openUnits) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return c
}

// itemsOf orders what a unit read: a file's OTLP requests as written (a
// request without timestamps at its predecessor's time), its transcript
// calls by start.
func itemsOf(in *Input) []item {
	items := make([]item, 0, len(in.Batches)+len(in.Transcript))
	var last time.Time
	for i := range in.Batches {
		if t, ok := batchStart(&in.Batches[i]); ok {
			last = t
		}
		items = append(items, item{at: last, batch: &in.Batches[i]})
	}
	sortCalls(in.Transcript)
	for i := range in.Transcript {
		items = append(items, item{at: in.Transcript[i].Start, call: &in.Transcript[i]})
	}
	return items
}

// replay is the second pass: the units opened in order of start, their
// requests fed by time across the units open, each unit let go after its
// last.
func (a *auditor) replay(ctx context.Context, cfg *loopdetect.Config) (Counts, error) {
	r, err := newReplayer(ctx, cfg, a.observe, a.events)
	if err != nil {
		return Counts{}, err
	}
	var totalBytes, doneBytes int64
	for _, u := range a.units {
		totalBytes += u.bytes
	}
	done := 0
	progress := func(u *unit) {
		done++
		doneBytes += u.bytes
		a.opts.Progress(Progress{Phase: PhaseReplaying, Files: done, Total: len(a.units), Bytes: doneBytes, TotalBytes: totalBytes, Current: u.files[0]})
	}
	var open openUnits
	pending := a.units
	for len(pending) > 0 || len(open) > 0 {
		if a.eventErr != nil {
			_ = r.shutdown()
			return Counts{}, a.eventErr
		}
		if len(pending) > 0 && (len(open) == 0 || !pending[0].start.After(open[0].at())) {
			u := pending[0]
			pending = pending[1:]
			in, err := a.load(u)
			if err != nil {
				a.skip(u.files[0], err)
				progress(u)
				continue
			}
			a.count(u, in)
			a.read++
			c := &cursor{u: u, items: itemsOf(in)}
			if len(c.items) > 0 && c.items[0].call != nil && c.items[0].at.Before(u.start) {
				// The first pass's look at its timestamps was wrong: its
				// earliest calls come after later ones of other files.
				a.opts.Note(fmt.Sprintf("%s: its first call (%s) is earlier than its timestamps said: replayed after later calls of other files",
					u.files[0], c.items[0].at.UTC().Format(time.RFC3339)))
			}
			if len(c.items) == 0 {
				progress(u)
				continue
			}
			heap.Push(&open, c)
			a.maxOpen = max(a.maxOpen, len(open))
			continue
		}
		c := open[0]
		it := &c.items[c.next]
		b := it.batch
		if it.call != nil {
			cb := callBatch(it.call)
			b = &cb
		}
		if err := r.feed(ctx, b); err != nil {
			_ = r.shutdown()
			return Counts{}, err
		}
		c.items[c.next] = item{} // let the request go
		if c.next++; c.next == len(c.items) {
			heap.Pop(&open)
			progress(c.u)
			continue
		}
		heap.Fix(&open, 0)
	}
	counts, err := r.close(ctx)
	if err == nil {
		err = a.eventErr
	}
	return counts, err
}

// count adds what a unit read to the audit's totals; each session is
// named by the file of the earliest input that held its calls.
func (a *auditor) count(u *unit, in *Input) {
	files := in.SessionFiles
	in.SessionFiles = nil
	a.total.mergeCounts(in)
	for k, v := range files {
		if at, ok := a.fileUnit[k]; !ok || u.index < at {
			a.total.SessionFiles[k] = v
			a.fileUnit[k] = u.index
		}
	}
}

func (a *auditor) observe(o *loopdetect.Observation) {
	a.tally.call(&Call{
		Session: o.Session, SessionSource: o.SessionSource, Client: o.Client, Tool: o.Tool, Start: o.Start,
		Signature: uint64(o.Signature), Fingerprint: uint64(o.Fingerprint),
		NameOnly: o.NameOnly, Failed: o.Failed, Counted: o.Counted,
	})
}

func (a *auditor) events(evs []loopevent.Event) {
	for i := range evs {
		a.tally.event(&evs[i])
	}
	if a.eventErr == nil {
		a.eventErr = a.opts.Events(evs)
	}
}
