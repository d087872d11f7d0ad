package tracing

import (
	"context"
	"errors"
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
	// final is Shutdown's context, set before stop is closed: the last
	// exports end with it.
	final context.Context

	// Owned by run: the failures not yet logged, and when one last was.
	failed  int
	warned  time.Time
	warnNow func() time.Time
}

func newProcessor(exp sdktrace.SpanExporter, cfg Config, m *metrics) *processor {
	p := &processor{exp: exp, queue: make(chan sdktrace.ReadOnlySpan, cfg.QueueSize), size: cfg.BatchSize,
		delay: cfg.BatchDelay, timeout: cfg.ExportTimeout, m: m, log: cfg.Logger,
		flushes: make(chan chan struct{}), stop: make(chan struct{}), done: make(chan struct{}), warnNow: time.Now}
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
			batch = p.export(context.Background(), batch)
		case <-timer.C:
			batch = p.export(context.Background(), batch)
		case ch := <-p.flushes:
			batch = p.drain(context.Background(), batch)
			close(ch)
		case <-p.stop:
			p.drain(p.final, batch)
			return
		}
		timer.Reset(p.delay)
	}
}

// drain exports batch and the spans queued now, in batches.
func (p *processor) drain(ctx context.Context, batch []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	for n := len(p.queue); n > 0; n-- {
		if batch = append(batch, <-p.queue); len(batch) >= p.size {
			batch = p.export(ctx, batch)
		}
	}
	return p.export(ctx, batch)
}

// export sends batch, within the export timeout and ctx, and returns it
// emptied. The spans of a failed export are counted dropped.
func (p *processor) export(ctx context.Context, batch []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	if len(batch) == 0 {
		return batch
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	err := p.exp.ExportSpans(ctx, batch)
	cancel()
	if err != nil {
		p.m.exportFailed.Add(float64(len(batch)))
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
// down. Spans ended afterwards are ignored.
func (p *processor) Shutdown(ctx context.Context) error {
	var err error
	p.stopOnce.Do(func() {
		p.stopped.Store(true)
		p.final = ctx
		close(p.stop)
		select {
		case <-p.done:
		case <-ctx.Done():
			// The last export ends with ctx: run returns at once.
			err = ctx.Err()
		}
		err = errors.Join(err, p.exp.Shutdown(ctx))
	})
	return err
}
