package loopdetect

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.uber.org/zap"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
)

// The traces and logs components of one loop_detect instance share one
// detector (and so one engine): a session reported by both signals — a
// Claude Code session sending tool spans and tool_result records — is one
// session, counted once and killed once. The factory holds the shared
// detectors by component id, as the memory limiter's factory holds its
// limiter; the first component started starts the detector and the last
// one shut down stops it.

// factory is the loop_detect factory's state: the detectors its
// components share.
type factory struct {
	mu        sync.Mutex
	detectors map[component.ID]*sharedDetector
}

// sharedDetector is one detector and the components using it.
type sharedDetector struct {
	d       *detector
	xLogs   *extract.Extractor
	refs    int
	started int
}

func (f *factory) acquire(set processor.Settings, cfg *Config) (*sharedDetector, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.detectors[set.ID]; ok {
		s.refs++
		return s, nil
	}
	d, err := newDetector(set, cfg, nil)
	if err != nil {
		return nil, err
	}
	keys := cfg.keys()
	if len(keys.Session) == 0 {
		keys.Session = defaultLogSessionKeys
	}
	s := &sharedDetector{d: d, xLogs: extract.New(keys, engine.NewNormalizer(cfg.normalizerConfig())), refs: 1}
	f.detectors[set.ID] = s
	return s, nil
}

func (f *factory) createTraces(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	s, err := f.acquire(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	if s.d.next == nil {
		// Timer-driven transitions of trace sessions go to the first
		// traces pipeline, and its logger names them.
		s.d.next = next
		s.d.logger = set.Logger
	}
	f.mu.Unlock()
	return &tracesComponent{sharedComponent: sharedComponent{f: f, id: set.ID, s: s}, next: next}, nil
}

func (f *factory) createLogs(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	s, err := f.acquire(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	if s.d.nextLogs == nil {
		s.d.nextLogs = next
		s.d.logsLogger = set.Logger
	}
	f.mu.Unlock()
	return &logsComponent{sharedComponent: sharedComponent{f: f, id: set.ID, s: s}, next: next}, nil
}

// sharedComponent is what the traces and logs components have in common:
// their share of the detector's lifecycle.
type sharedComponent struct {
	f        *factory
	id       component.ID
	s        *sharedDetector
	started  bool
	shutdown bool
}

func (c *sharedComponent) Start(ctx context.Context, host component.Host) error {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	if c.started {
		return nil
	}
	c.started = true
	c.s.started++
	if c.s.started == 1 {
		return c.s.d.Start(ctx, host)
	}
	return nil
}

func (c *sharedComponent) Shutdown(ctx context.Context) error {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	if c.shutdown {
		return nil
	}
	c.shutdown = true
	c.s.refs--
	if c.s.refs > 0 {
		return nil
	}
	if c.f.detectors[c.id] == c.s {
		delete(c.f.detectors, c.id)
	}
	return c.s.d.Shutdown(ctx)
}

func (c *sharedComponent) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: true}
}

// tracesComponent is the traces side of a shared detector.
type tracesComponent struct {
	sharedComponent
	next consumer.Traces
}

func (c *tracesComponent) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	return c.s.d.consumeTraces(ctx, td, c.next)
}

// logsComponent is the logs side of a shared detector.
type logsComponent struct {
	sharedComponent
	next consumer.Logs
}

func (c *logsComponent) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	return c.s.d.consumeLogs(ctx, ld, c.s.xLogs, c.next)
}

// loggerFor is the logger of the pipeline a transition goes to, so a log
// line names the signal that caused it.
func (d *detector) loggerFor(t *engine.Transition) *zap.Logger {
	if d.logsLogger != nil && d.routeToLogs(t) {
		return d.logsLogger
	}
	return d.logger
}
