// Command loopagent is a simulated AI agent. It emits real OpenTelemetry
// GenAI spans (invoke_agent, chat, execute_tool) over OTLP with the OTel Go
// SDK, following a named scenario (the 1,972-call bash loop, an A-B oscillation,
// pagination, rate-limit retries, an approval wait, a terminal re-read, a
// healthy edit/test cycle), or, with --load, a benchmark stream of many
// concurrent sessions at a target span rate.
//
// A scenario that finishes (or reaches --max-calls) prints one JSON result
// line {"status":"ok",...} to stdout. On SIGTERM/SIGINT the agent ends its
// spans, flushes them and exits 143/130 without a result line: the
// supervisor that killed it writes the honest error line.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/otelcol-loop/otelcol-loop/cmd/loopagent/internal/load"
	"github.com/otelcol-loop/otelcol-loop/cmd/loopagent/internal/scenario"
)

type config struct {
	endpoint     string
	protocol     string
	scenario     string
	speed        float64
	maxCalls     int
	sessionID    string
	noEvidence   bool
	noContent    bool
	model        string
	quiet        bool
	list         bool
	load         bool
	sessions     int
	rate         float64
	duration     time.Duration
	loopFraction float64
	seed         uint64
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	c, code, ok := parseFlags(args, stdout, stderr)
	if !ok {
		return code
	}
	a := &agentRun{c: c, stdout: stdout}
	a.logf = func(format string, args ...any) { fmt.Fprintf(stderr, "loopagent: "+format+"\n", args...) }

	var sc scenario.Scenario
	if !c.load {
		var err error
		if sc, err = scenario.Get(c.scenario); err != nil {
			a.logf("%v", err)
			return 2
		}
	}
	if c.speed <= 0 {
		a.logf("--speed must be > 0")
		return 2
	}

	// Signals: the first SIGTERM/SIGINT cancels the run; spans are ended and
	// flushed before exit.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := a.cancelOnSignal(ctx, cancel)
	defer stop()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(a.reportErr))

	exp, endpoint, err := newExporter(ctx, c)
	if err != nil {
		a.logf("exporter: %v", err)
		return 1
	}
	res, err := newResource(ctx)
	if err != nil {
		a.logf("resource: %v", err) // partial resource is still usable
	}
	a.tp = newTracerProvider(exp, res, c.load)
	if c.load {
		return a.runLoad(ctx, endpoint)
	}
	return a.runScenario(ctx, sc, endpoint)
}

// parseFlags reads the command line into a config. When ok is false the
// command is done (--help, --list or a bad flag) and code is its exit code.
func parseFlags(args []string, stdout, stderr io.Writer) (c config, code int, ok bool) {
	fs := flag.NewFlagSet("loopagent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.endpoint, "endpoint", "", "OTLP endpoint host:port or URL (default $OTEL_EXPORTER_OTLP_ENDPOINT, else 127.0.0.1:4318 for http, 127.0.0.1:4317 for grpc)")
	fs.StringVar(&c.protocol, "protocol", "http", "OTLP protocol: http (http/protobuf) or grpc")
	fs.StringVar(&c.scenario, "scenario", "bash-loop", "scenario: "+strings.Join(scenario.Names(), ", "))
	fs.Float64Var(&c.speed, "speed", 1, "time compression factor: scenario gaps are divided by it (span timestamps stay real)")
	fs.IntVar(&c.maxCalls, "max-calls", 0, "stop after this many tool calls (0: run until the scenario ends or the agent is killed)")
	fs.StringVar(&c.sessionID, "session-id", "", "gen_ai.conversation.id written on every span (none if empty); in load mode the prefix of the sessions' ids (default: random per run)")
	fs.BoolVar(&c.noEvidence, "no-evidence", false, "leave out the loopdetect.* evidence attributes")
	fs.BoolVar(&c.noContent, "no-content", false, "leave out tool arguments and results (content capture off)")
	fs.StringVar(&c.model, "model", "sim-model-1", "gen_ai.request.model of chat spans")
	fs.BoolVar(&c.quiet, "q", false, "do not log each tool call to stderr")
	fs.BoolVar(&c.list, "list", false, "list the scenarios and exit")
	fs.BoolVar(&c.load, "load", false, "load mode: emit a benchmark span mix instead of a scenario")
	fs.IntVar(&c.sessions, "sessions", 10, "load mode: concurrent sessions (one trace and conversation id each)")
	fs.Float64Var(&c.rate, "rate", 1000, "load mode: target spans per second over all sessions")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "load mode: how long to emit")
	fs.Float64Var(&c.loopFraction, "loop-fraction", 0.1, "load mode: fraction of sessions that fall into a loop")
	fs.Uint64Var(&c.seed, "seed", 1, "load mode: PRNG seed")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: loopagent [flags]\n\nScenarios:\n")
		for _, s := range scenario.All() {
			fmt.Fprintf(stderr, "  %-18s %s\n", s.Name, s.Description)
		}
		fmt.Fprintf(stderr, "\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprintf(stderr, "\nOTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES are honoured (service.instance.id, ...).\n")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, 0, false
		}
		return c, 2, false
	}
	if c.list {
		for _, s := range scenario.All() {
			fmt.Fprintf(stdout, "%s\t%s\n", s.Name, s.Description)
		}
		return c, 0, false
	}
	return c, 0, true
}

// agentRun is one run of the agent once its flags are read: where it logs
// and writes its result, its tracer provider and its export errors.
type agentRun struct {
	c            config
	stdout       io.Writer
	logf         func(format string, args ...any)
	tp           *sdktrace.TracerProvider
	exportErrors atomic.Int64
	gotSig       atomic.Value
}

// cancelOnSignal cancels ctx on the first SIGTERM or SIGINT and remembers
// which one came. The returned func stops listening.
func (a *agentRun) cancelOnSignal(ctx context.Context, cancel context.CancelFunc) (stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		select {
		case s := <-sigs:
			a.gotSig.Store(s)
			cancel()
		case <-ctx.Done():
		}
	}()
	return func() { signal.Stop(sigs) }
}

// reportErr logs the first three export errors and counts them all.
func (a *agentRun) reportErr(err error) {
	if n := a.exportErrors.Add(1); n <= 3 {
		a.logf("export error: %v", err)
	} else if n == 4 {
		a.logf("further export errors suppressed")
	}
}

// newTracerProvider batches spans to exp: in load mode with a queue and
// batches sized for thousands of spans a second.
func newTracerProvider(exp sdktrace.SpanExporter, res *resource.Resource, load bool) *sdktrace.TracerProvider {
	var bsp []sdktrace.BatchSpanProcessorOption
	if load {
		bsp = []sdktrace.BatchSpanProcessorOption{sdktrace.WithMaxQueueSize(1 << 16),
			sdktrace.WithMaxExportBatchSize(2048), sdktrace.WithBatchTimeout(200 * time.Millisecond)}
	} else {
		bsp = []sdktrace.BatchSpanProcessorOption{sdktrace.WithBatchTimeout(100 * time.Millisecond)}
	}
	return sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithBatcher(exp, bsp...),
	)
}

// shutdown flushes and stops the tracer provider, for at most 10 seconds.
func (a *agentRun) shutdown() {
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := a.tp.Shutdown(sctx); err != nil {
		a.reportErr(err)
	}
}

// runLoad emits the benchmark span mix and prints its statistics.
func (a *agentRun) runLoad(ctx context.Context, endpoint string) int {
	c := a.c
	a.logf("load: %d sessions, %.0f spans/s for %v to %s (%s)", c.sessions, c.rate, c.duration, endpoint, c.protocol)
	// Conversation ids must not collide with an earlier run's sessions:
	// --session-id is their prefix, else a random run id.
	prefix := c.sessionID
	if prefix == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		prefix = "load-" + hex.EncodeToString(b[:])
	}
	st, err := load.Run(ctx, a.tp, load.Options{Sessions: c.sessions, Rate: c.rate, Duration: c.duration,
		LoopFraction: c.loopFraction, Seed: c.seed, SessionPrefix: prefix})
	a.shutdown()
	if err != nil {
		a.logf("%v", err)
		return 2
	}
	out := struct {
		Status string `json:"status"`
		Mode   string `json:"mode"`
		load.Stats
		ExportErrors int64 `json:"export_errors"`
	}{"ok", "load", st, a.exportErrors.Load()}
	if ctx.Err() != nil {
		out.Status = "interrupted"
	}
	return printJSON(a.stdout, out)
}

// runScenario plays sc and prints its result line, or exits 143/130
// without one when a signal ended it.
func (a *agentRun) runScenario(ctx context.Context, sc scenario.Scenario, endpoint string) int {
	c := a.c
	a.logf("scenario %s (agent %s) to %s (%s), speed x%g, pid %d", sc.Name, sc.Agent, endpoint, c.protocol, c.speed, os.Getpid())
	opts := scenario.Options{
		Speed: c.speed, MaxCalls: c.maxCalls, SessionID: c.sessionID,
		NoEvidence: c.noEvidence, NoContent: c.noContent, Model: c.model,
		Flush: func(ctx context.Context) error {
			err := a.tp.ForceFlush(ctx)
			if err != nil {
				a.reportErr(err)
			}
			return err
		},
	}
	if !c.quiet {
		opts.OnCall = func(ci scenario.CallInfo) {
			status := "ok"
			if ci.Call.ErrorType != "" {
				status = "error " + ci.Call.ErrorType
			}
			a.logf("call %d %s %s -> %s (trace %s span %s)", ci.Index, ci.Call.Tool, ci.Call.Args, status, ci.TraceID, ci.SpanID)
		}
	}
	result, err := scenario.Run(ctx, a.tp, sc, opts)
	a.shutdown()
	if err != nil {
		a.logf("%v", err)
		return 1
	}
	if result.Stop == "canceled" {
		code := 143
		if s, _ := a.gotSig.Load().(os.Signal); s == syscall.SIGINT {
			code = 130
		}
		a.logf("terminated by signal after %d tool calls; spans flushed", result.Calls)
		return code
	}
	return printJSON(a.stdout, map[string]any{
		"status":        "ok",
		"scenario":      result.Scenario,
		"agent":         result.Agent,
		"stop":          result.Stop,
		"calls":         result.Calls,
		"tool_errors":   result.Errors,
		"trace_id":      result.TraceID,
		"session_id":    result.SessionID,
		"elapsed_s":     roundMillis(result.Elapsed),
		"export_errors": a.exportErrors.Load(),
		"pid":           os.Getpid(),
	})
}

func roundMillis(d time.Duration) float64 { return float64(d.Milliseconds()) / 1000 }

func printJSON(w io.Writer, v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 1
	}
	fmt.Fprintln(w, string(b))
	return 0
}

// newResource builds the agent's resource: service.name (default
// "loopagent"), then OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES (where a
// supervisor puts service.instance.id), process.pid and host.name.
func newResource(ctx context.Context) (*resource.Resource, error) {
	return resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "loopagent")),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
		resource.WithProcessPID(),
		resource.WithHost(),
	)
}

// splitEndpoint turns "host:port" or "http(s)://host:port[/path]" into a
// host:port, an optional URL path and whether TLS is off.
func splitEndpoint(ep string) (host, path string, insecure bool, err error) {
	if !strings.Contains(ep, "://") {
		return ep, "", true, nil
	}
	u, err := url.Parse(ep)
	if err != nil {
		return "", "", false, err
	}
	if u.Host == "" {
		return "", "", false, fmt.Errorf("endpoint %q has no host", ep)
	}
	return u.Host, strings.TrimRight(u.Path, "/"), u.Scheme != "https", nil
}

func newExporter(ctx context.Context, c config) (sdktrace.SpanExporter, string, error) {
	ep := c.endpoint
	// Like any OTel SDK agent, the simulated one follows the standard
	// variable when no flag says otherwise (a base URL: /v1/traces is added
	// for http).
	envBase := ""
	if ep == "" {
		envBase = os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
		ep = envBase
	}
	switch c.protocol {
	case "http", "http/protobuf":
		if ep == "" {
			ep = "127.0.0.1:4318"
		}
		host, path, insecure, err := splitEndpoint(ep)
		if err != nil {
			return nil, "", err
		}
		if envBase != "" {
			path += "/v1/traces"
		}
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(host), otlptracehttp.WithTimeout(5 * time.Second),
			otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 100 * time.Millisecond,
				MaxInterval: time.Second, MaxElapsedTime: 5 * time.Second})}
		if insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		if path != "" {
			opts = append(opts, otlptracehttp.WithURLPath(path))
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		return exp, ep, err
	case "grpc":
		if ep == "" {
			ep = "127.0.0.1:4317"
		}
		host, _, insecure, err := splitEndpoint(ep)
		if err != nil {
			return nil, "", err
		}
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(host), otlptracegrpc.WithTimeout(5 * time.Second),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: 100 * time.Millisecond,
				MaxInterval: time.Second, MaxElapsedTime: 5 * time.Second})}
		if insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		exp, err := otlptracegrpc.New(ctx, opts...)
		return exp, ep, err
	}
	return nil, "", fmt.Errorf("unknown --protocol %q (http or grpc)", c.protocol)
}
