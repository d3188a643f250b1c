package loopdetect

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

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
// limiter; the components are processorhelper's, around the detector's
// walk. The first component started starts the detector; the last one shut
// down stops it and the factory forgets it, so a reloaded configuration
// starts afresh.

// factory is the loop_detect factory's state: the detectors its
// components share.
type factory struct {
	mu        sync.Mutex
	detectors map[component.ID]*detector
}

var capabilities = consumer.Capabilities{MutatesData: true}

func (f *factory) createTraces(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	m, err := f.join(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	s := m.d.traces
	fwd, err := consumer.NewTraces(s.forwarder(next.ConsumeTraces))
	if err == nil {
		var p processor.Traces
		p, err = processorhelper.NewTraces(ctx, set, cfg, fwd, s.process, m.options()...)
		if err == nil {
			s.addOutput(next.ConsumeTraces, set.Logger)
			return p, nil
		}
	}
	_ = m.shutdown(ctx)
	return nil, err
}

func (f *factory) createLogs(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	m, err := f.join(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	s := m.d.logs
	fwd, err := consumer.NewLogs(s.forwarder(next.ConsumeLogs))
	if err == nil {
		var p processor.Logs
		p, err = processorhelper.NewLogs(ctx, set, cfg, fwd, s.process, m.options()...)
		if err == nil {
			s.addOutput(next.ConsumeLogs, set.Logger)
			return p, nil
		}
	}
	_ = m.shutdown(ctx)
	return nil, err
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

func (m *member) options() []processorhelper.Option {
	return []processorhelper.Option{
		processorhelper.WithCapabilities(capabilities),
		processorhelper.WithStart(m.start),
		processorhelper.WithShutdown(m.shutdown),
	}
}

func (m *member) start(context.Context, component.Host) error {
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

func (m *member) shutdown(ctx context.Context) error {
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
