// Command loopreplay runs the loop_detect processor over recorded OTLP JSON
// traces, offline and in event time, and prints one JSON object per state
// transition. Use it to audit recorded agent runs and to calibrate
// thresholds: --summary prints detection delays and verdict counts.
//
//	loopreplay [--config FILE] [--summary] FILE|- ...
//
// Exit status: 0 on success, 2 on unreadable input or configuration.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"

	"github.com/otelcol-loop/otelcol-loop/internal/replay"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loopreplay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "YAML file holding a loop_detect config block (top-level `loop_detect:` or `processors: {loop_detect: …}`)")
	summary := fs.Bool("summary", false, "print per-session final state and detection delay, and counts by state, to stderr")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: loopreplay [--config FILE] [--summary] FILE|- ...")
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
	var batches []replay.Batch
	for _, name := range fs.Args() {
		b, err := readInput(name, stdin)
		if err != nil {
			fmt.Fprintf(stderr, "loopreplay: %v\n", err)
			return 2
		}
		batches = append(batches, b...)
	}
	res, err := replay.Run(context.Background(), cfg, batches)
	if err != nil {
		fmt.Fprintf(stderr, "loopreplay: %v\n", err)
		return 2
	}
	if err := replay.WriteLines(stdout, res.Events); err != nil {
		fmt.Fprintf(stderr, "loopreplay: writing output: %v\n", err)
		return 2
	}
	if *summary {
		enc := json.NewEncoder(stderr)
		enc.SetIndent("", "  ")
		_ = enc.Encode(replay.Summarize(res.Events))
	}
	return 0
}

func readInput(name string, stdin io.Reader) ([]replay.Batch, error) {
	if name == "-" {
		return replay.ReadOTLPJSON(stdin, "stdin")
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return replay.ReadOTLPJSON(f, name)
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
