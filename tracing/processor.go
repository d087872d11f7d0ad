package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// warnEvery is how often at most a failed export is logged.
const warnEvery = time.Minute

// processor is the provider's span processor. OnEnd puts a sampled span
// on a bounded queue without ever waiting: a full queue drops the span and
// counts it. One goroutine takes the spans off in batches and exports each
// batch (BatchSize spans, or what came in BatchDelay), so that whatever the
// collector does (slow, down, refusing) only that goroutine waits.
//
// It stands in for the SDK's BatchSpanProcessor, which either drops
// without telling anyone but a global MeterProvider, or, told to block,
// blocks the span's End: a goroutine of ours in front of it would then
// wait, at shutdown, on a queue nobody reads any more.
type processor struct {
	exp     sdktrace.SpanExporter
	queue   chan sdktrace.ReadOnlySpan
	size    int
	delay   time.Duration
	timeout time.Duration
	m       *metrics
	log     *slog.Logger

	flushes  chan chan struct{}
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	stopped  atomic.Bool
	// ctx bounds every export: Shutdown cancels it when its own context
	// ends, so that an export the collector holds up ends then too. lost
	// is how many spans the exports after Shutdown failed to send, set
	// before done is closed.
	ctx    context.Context
	cancel context.CancelFunc
	lost   int

	// Owned by run: the spans of failed exports (all, and those not yet
	// logged), and when a failure was last logged.
	unsent  int
	failed  int
	warned  time.Time
	warnNow func() time.Time
}

func newProcessor(exp sdktrace.SpanExporter, cfg Config, m *metrics) *processor {
	p := &processor{exp: exp, queue: make(chan sdktrace.ReadOnlySpan, cfg.QueueSize), size: cfg.BatchSize,
		delay: cfg.BatchDelay, timeout: cfg.ExportTimeout, m: m, log: cfg.Logger,
		flushes: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{}), warnNow: time.Now}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	go p.run()
	return p
}

// OnStart does nothing: a span is queued when it ends.
func (p *processor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd queues s for export, or drops it (counted) when the queue is full.
// It never blocks.
func (p *processor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() || p.stopped.Load() {
		return
	}
	select {
	case p.queue <- s:
	default:
		p.m.queueFull.Inc()
	}
}

// run exports the queued spans in batches until Shutdown.
func (p *processor) run() {
	defer close(p.done)
	timer := time.NewTimer(p.delay)
	defer timer.Stop()
	batch := make([]sdktrace.ReadOnlySpan, 0, p.size)
	for {
		select {
		case s := <-p.queue:
			if batch = append(batch, s); len(batch) < p.size {
				continue
			}
			batch = p.export(batch)
		case <-timer.C:
			batch = p.export(batch)
		case ch := <-p.flushes:
			batch = p.drain(batch)
			close(ch)
		case <-p.stop:
			before := p.unsent
			p.drain(batch)
			p.lost = p.unsent - before
			return
		}
		timer.Reset(p.delay)
	}
}

// drain exports batch and the spans queued now, in batches.
func (p *processor) drain(batch []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	for n := len(p.queue); n > 0; n-- {
		if batch = append(batch, <-p.queue); len(batch) >= p.size {
			batch = p.export(batch)
		}
	}
	return p.export(batch)
}

// export sends batch, within the export timeout, and returns it emptied.
// The spans of a failed export are counted dropped.
func (p *processor) export(batch []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	if len(batch) == 0 {
		return batch
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.timeout)
	err := p.exp.ExportSpans(ctx, batch)
	cancel()
	if err != nil {
		p.m.exportFailed.Add(float64(len(batch)))
		p.unsent += len(batch)
		p.warn(len(batch), err)
	}
	clear(batch)
	return batch[:0]
}

// warn logs a failed export, at most once every warnEvery, with the spans
// lost since the last line. The exporter's error names the collector, never
// the export's headers.
func (p *processor) warn(lost int, err error) {
	p.failed += lost
	if now := p.warnNow(); p.warned.IsZero() || now.Sub(p.warned) >= warnEvery {
		p.log.Warn("tracing: export failed; spans dropped", "spans", p.failed, "error", err)
		p.warned, p.failed = now, 0
	}
}

// ForceFlush exports the spans queued now.
func (p *processor) ForceFlush(ctx context.Context) error {
	ch := make(chan struct{})
	select {
	case p.flushes <- ch:
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown exports what is queued, until ctx ends, then shuts the exporter
// down. Spans ended afterwards are ignored. When ctx ends first, the
// export under way is cut short and the spans left are counted dropped.
func (p *processor) Shutdown(ctx context.Context) error {
	var err error
	p.stopOnce.Do(func() {
		p.stopped.Store(true)
		close(p.stop)
		select {
		case <-p.done:
			if p.lost > 0 {
				err = fmt.Errorf("tracing: %d spans not exported", p.lost)
			}
		case <-ctx.Done():
			err = ctx.Err()
			p.cancel()
			select { // each export left fails at once
			case <-p.done:
			case <-time.After(shutdownGrace):
			}
		}
		p.cancel()
		err = errors.Join(err, p.exp.Shutdown(ctx))
	})
	return err
}

// shutdownGrace is how long Shutdown waits, its deadline passed, for the
// exports it cut short to return.
const shutdownGrace = time.Second
