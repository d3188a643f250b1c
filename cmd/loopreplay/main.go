// Command loopreplay runs the loop_detect processor over recorded OTLP JSON
// traces and logs, or over agent transcripts (Claude Code session files and
// stream-json output, each tool call replayed as the log record Claude
// Code's telemetry sends, with its result; Gemini CLI session files, each
// call replayed as that CLI's tool_call span; Codex CLI rollout files, each
// call replayed as its codex.tool_result log record; Qwen Code session
// files, each call replayed as its qwen-code.tool span; OpenCode sessions
// as `opencode export` prints them, each call replayed as its ai.toolCall
// span), offline and in event time, and prints one JSON object per state
// transition. Use it to audit past agent sessions and to calibrate
// thresholds: --summary says what was read and lists every session with
// its final state, the call it was first stuck at and its detection delay;
// --html writes a timeline page of every call.
// Each file's format is found from its content; gzip input is read too.
//
//	loopreplay [--config FILE] [--summary] [--html FILE] FILE|- ...
//
// An input that cannot be read (missing, unreadable, a directory, empty,
// binary, not a format it reads, a bad line: named file:line) is skipped
// with one line on stderr saying why, and the others are audited; lines
// before a file's first JSON line (a shell's complaints) and a last line
// cut short are left out, saying so. Files are read one after another, in
// order of start, so an audit of a thousand sessions holds a few at a
// time. On a terminal, a run longer than a second shows its progress on
// stderr.
//
// Exit status: 0 when every input was read whole; 3 when some inputs were
// skipped or read in part and the rest audited; 2 on usage or
// configuration errors, a page or output that cannot be written, or when
// no input could be read at all.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/internal/replay"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loopreplay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "YAML file holding a loop_detect config block (top-level `loop_detect:` or `processors: {loop_detect: …}`)")
	summary := fs.Bool("summary", false, "print what was read (spans, log records, tool calls by client, what was skipped and why) and every session's final state, calls, transitions, kills and detection delay, to stderr")
	htmlPath := fs.String("html", "", "write a self-contained timeline page (a row per session, a cell per tool call) to this file")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: loopreplay [--config FILE] [--summary] [--html FILE] FILE|- ...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	overrides, err := loadConfig(*configPath)
	if err != nil {
		fmt.Fprintf(stderr, "loopreplay: %v\n", err)
		return 2
	}
	cfg, err := replay.Config(overrides)
	if err != nil {
		fmt.Fprintf(stderr, "loopreplay: %s: %v\n", *configPath, err)
		return 2
	}
	progress := newProgressLine(stderr, time.Now)
	res, err := replay.Audit(context.Background(), cfg, fs.Args(), replay.AuditOptions{
		Page:     *htmlPath != "",
		Stdin:    stdin,
		Events:   func(evs []loopevent.Event) error { return replay.WriteLines(stdout, evs) },
		Note:     func(line string) { progress.note("loopreplay: " + line) },
		Progress: progress.update,
	})
	progress.clear()
	if err != nil {
		fmt.Fprintf(stderr, "loopreplay: %v\n", err)
		return 2
	}
	if *summary {
		enc := json.NewEncoder(stderr)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		_ = enc.Encode(res.Summary)
	}
	if *htmlPath != "" {
		if err := writePage(*htmlPath, res.Page); err != nil {
			fmt.Fprintf(stderr, "loopreplay: %v\n", err)
			return 2
		}
	}
	return exitCode(res)
}

// exitCode says how the inputs were read: all whole (0), some skipped or
// read in part (3), none at all (2).
func exitCode(res *replay.AuditResult) int {
	switch {
	case res.Read == 0 && res.Skipped > 0:
		return 2
	case res.Skipped > 0 || res.ReadInPart > 0:
		return 3
	}
	return 0
}

func writePage(path string, page *replay.Page) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := replay.WritePage(f, page); err != nil {
		_ = f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// loadConfig reads the loop_detect block from a YAML file; a collector
// config (processors: loop_detect: …) works too.
func loadConfig(path string) (*confmap.Conf, error) {
	if path == "" {
		return nil, nil
	}
	p := fileprovider.NewFactory().Create(confmap.ProviderSettings{})
	ret, err := p.Retrieve(context.Background(), "file:"+path, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	conf, err := ret.AsConf()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, key := range []string{"loop_detect", "processors::loop_detect"} {
		if conf.IsSet(key) {
			sub, err := conf.Sub(key)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", path, key, err)
			}
			return sub, nil
		}
	}
	return nil, errors.New(path + ": no loop_detect block (expected `loop_detect:` or `processors: {loop_detect: …}`)")
}
