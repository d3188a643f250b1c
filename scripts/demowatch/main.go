// Command demowatch follows the OTLP JSON-lines file the collector's file
// exporter writes and prints every loop transition event
// (loopdetect.transition) in it as a readable line, as it appears: span
// events of the traces input and log records of the logs input (Claude
// Code), and the tool calls an agent refused to run (blocked by its hook).
// It is the "what did the collector see" pane of `make demo`.
//
//	demowatch --file traces.jsonl [--follow] [--json]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
)

func main() {
	file := flag.String("file", "", "OTLP JSON lines written by the file exporter")
	follow := flag.Bool("follow", false, "keep reading as the file grows (until SIGTERM/SIGINT)")
	asJSON := flag.Bool("json", false, "print each event as one JSON object instead of text")
	prefix := flag.String("prefix", "", "text put in front of every printed line")
	flag.Parse()
	if *file == "" {
		fmt.Fprintln(os.Stderr, "demowatch: --file is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	w := &watcher{out: os.Stdout, json: *asJSON, prefix: *prefix, seen: map[string]bool{}}
	if err := w.run(ctx, *file, *follow); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "demowatch:", err)
		os.Exit(1)
	}
}

type watcher struct {
	out    io.Writer
	json   bool
	prefix string
	seen   map[string]bool
	n      int
}

// run reads complete lines from path; with follow it waits for the file to
// appear and grow, keeping an incomplete last line until it is finished.
func (w *watcher) run(ctx context.Context, path string, follow bool) error {
	var f *os.File
	for {
		var err error
		if f, err = os.Open(path); err == nil {
			break
		}
		if !follow || !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var partial []byte
	for {
		line, err := r.ReadBytes('\n')
		partial = append(partial, line...)
		if err == nil {
			w.line(partial)
			partial = partial[:0]
			continue
		}
		if !errors.Is(err, io.EOF) {
			return err
		}
		if !follow {
			if len(partial) > 0 {
				w.line(partial)
			}
			return nil
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (w *watcher) line(b []byte) {
	if len(strings.TrimSpace(string(b))) == 0 {
		return
	}
	if bytes.Contains(b[:min(len(b), 32)], []byte(`"resourceLogs"`)) {
		w.logsLine(b)
		return
	}
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(b)
	if err != nil {
		fmt.Fprintf(os.Stderr, "demowatch: skipping unreadable line: %v\n", err)
		return
	}
	err = loopevent.Visit(td, func(ev loopevent.Event, sp ptrace.Span) {
		if ev.ID != "" && w.seen[ev.ID] {
			return
		}
		w.seen[ev.ID] = true
		w.print(ev, sp.Name())
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "demowatch: bad transition event: %v\n", err)
	}
}

// logsLine prints the transitions the logs input appended as log records,
// and the agent's refused calls, in record order.
func (w *watcher) logsLine(b []byte) {
	ld, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(b)
	if err != nil {
		fmt.Fprintf(os.Stderr, "demowatch: skipping unreadable line: %v\n", err)
		return
	}
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		sls := rls.At(i).ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				w.logRecord(lrs.At(k))
			}
		}
	}
}

func (w *watcher) logRecord(lr plog.LogRecord) {
	if lr.EventName() == loopevent.EventName {
		ev, err := loopevent.FromAttributes(lr.Attributes())
		if err != nil {
			fmt.Fprintf(os.Stderr, "demowatch: bad transition record: %v\n", err)
			return
		}
		if ev.ID != "" && w.seen[ev.ID] {
			return
		}
		w.seen[ev.ID] = true
		w.print(ev, "log record")
		return
	}
	attr := func(k string) string {
		v, _ := lr.Attributes().Get(k)
		return v.AsString()
	}
	if lr.Body().AsString() != "claude_code.tool_decision" || attr("decision") != "reject" {
		return
	}
	w.n++
	at := lr.Timestamp().AsTime().Local().Format("15:04:05.000")
	if w.json {
		b, _ := json.Marshal(map[string]string{"refused_call": attr("tool_name"), "source": attr("source"), "session": attr("session.id"), "time": at})
		fmt.Fprintf(w.out, "%s%s\n", w.prefix, b)
		return
	}
	fmt.Fprintf(w.out, "%s%s  refused  %s call not run: rejected by the agent's %s  (session %s)\n",
		w.prefix, at, attr("tool_name"), attr("source"), attr("session.id"))
}

func (w *watcher) print(ev loopevent.Event, spanName string) {
	w.n++
	if w.json {
		b, _ := json.Marshal(ev)
		fmt.Fprintf(w.out, "%s%s\n", w.prefix, b)
		return
	}
	kill := ""
	switch {
	case ev.Kill && ev.DryRun:
		kill = "  [kill decided, dry run]"
	case ev.Kill:
		kill = "  >>> KILL REQUESTED"
	}
	at := ev.DecidedAt.Local().Format("15:04:05.000")
	fmt.Fprintf(w.out, "%s%s  transition %d  %s -> %s  reason=%s  at tool call #%d%s\n",
		w.prefix, at, ev.Sequence, ev.From, ev.To, ev.Reason, ev.CallIndex, kill)
	fmt.Fprintf(w.out, "%s              %q\n", w.prefix, ev.Explanation)
	var detail []string
	if ev.Period > 0 {
		detail = append(detail, fmt.Sprintf("period %d x%d", ev.Period, ev.Repetitions))
	}
	if len(ev.CycleTools) > 0 {
		detail = append(detail, "cycle ["+strings.Join(ev.CycleTools, ", ")+"]")
	}
	if ev.DelayCalls > 0 || ev.DelaySeconds > 0 {
		detail = append(detail, fmt.Sprintf("caught %d calls / %.1f s after the loop began", ev.DelayCalls, ev.DelaySeconds))
	}
	if ev.TokensTotal > 0 {
		detail = append(detail, fmt.Sprintf("tokens burned: %d in the loop, %d in the session", ev.TokensLoop, ev.TokensTotal))
	}
	detail = append(detail, fmt.Sprintf("session %s", ev.Session))
	if ev.Target.PID > 0 {
		detail = append(detail, fmt.Sprintf("target pid %d", ev.Target.PID))
	}
	fmt.Fprintf(w.out, "%s              %s\n", w.prefix, strings.Join(detail, "; "))
	if ev.TraceID != "" {
		fmt.Fprintf(w.out, "%s              in trace %s on span %s (%q)\n", w.prefix, ev.TraceID, ev.SpanID, spanName)
	}
}
