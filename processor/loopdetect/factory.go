package loopdetect

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/metadata"
)

// NewFactory returns the loop_detect processor factory. Its traces and logs
// components of one processor id share a detector.
func NewFactory() processor.Factory {
	f := &factory{detectors: map[component.ID]*detector{}}
	return processor.NewFactory(
		metadata.Type,
		func() component.Config { return createDefaultConfig() },
		processor.WithTraces(f.createTraces, metadata.TracesStability),
		processor.WithLogs(f.createLogs, metadata.LogsStability),
	)
}

// The traces and logs components of one loop_detect instance share one
// detector (and so one engine): a session reported by both signals — a
// Claude Code session sending tool spans and tool_result records — is one
// session, counted once and killed once. The factory owns the shared
// detectors by component id, as the memory limiter's factory owns its
// limiter. The first component started starts the detector; the last one shut
// down stops it and the factory forgets it, so a reloaded configuration
// starts afresh.

// factory is the loop_detect factory's state: the detectors its
// components share.
type factory struct {
	mu        sync.Mutex
	detectors map[component.ID]*detector
}

var capabilities = consumer.Capabilities{MutatesData: true}

func (f *factory) createTraces(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	m, err := f.join(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	m.d.traces.addOutput(next.ConsumeTraces, set.Logger)
	return &tracesComponent{member: m, next: next}, nil
}

func (f *factory) createLogs(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	m, err := f.join(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	m.d.logs.addOutput(next.ConsumeLogs, set.Logger)
	return &logsComponent{member: m, next: next}, nil
}

// tracesComponent is a loop_detect traces component.
type tracesComponent struct {
	*member
	next consumer.Traces
}

func (c *tracesComponent) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	return c.d.traces.consume(ctx, td, c.next.ConsumeTraces)
}

// logsComponent is a loop_detect logs component.
type logsComponent struct {
	*member
	next consumer.Logs
}

func (c *logsComponent) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	return c.d.logs.consume(ctx, ld, c.next.ConsumeLogs)
}

// join returns a component's membership of the detector of its id,
// creating the detector for the first.
func (f *factory) join(set processor.Settings, cfg *Config) (*member, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.detectors[set.ID]
	if !ok {
		var err error
		if d, err = newDetector(set, cfg); err != nil {
			return nil, err
		}
		// Once per processor, not per signal: traces and logs share it.
		cfg.warnDeprecated(set.Logger)
		f.detectors[set.ID] = d
	}
	d.members++
	return &member{f: f, id: set.ID, d: d}, nil
}

// member is one component's hold on its shared detector. The collector
// starts and shuts down each component once, but may shut down one it
// never started; the flags keep the counts right either way.
type member struct {
	f        *factory
	id       component.ID
	d        *detector
	started  bool
	shutDown bool
}

// Capabilities says the component writes into the batches it forwards
// (verdict events, and forged ones removed).
func (*member) Capabilities() consumer.Capabilities { return capabilities }

// Start starts the shared detector with the first of its components.
func (m *member) Start(context.Context, component.Host) error {
	m.f.mu.Lock()
	defer m.f.mu.Unlock()
	if m.started || m.shutDown {
		return nil
	}
	m.started = true
	if m.d.started++; m.d.started == 1 {
		m.d.start()
	}
	return nil
}

// Shutdown stops the shared detector with the last of its components.
func (m *member) Shutdown(ctx context.Context) error {
	m.f.mu.Lock()
	defer m.f.mu.Unlock()
	if m.shutDown {
		return nil
	}
	m.shutDown = true
	if m.d.members--; m.d.members > 0 {
		return nil
	}
	if m.f.detectors[m.id] == m.d {
		delete(m.f.detectors, m.id)
	}
	return m.d.shutdown(ctx)
}
