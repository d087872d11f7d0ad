package tracing_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/fluxora/webhook-worker/internal/waitfor"
	"github.com/fluxora/webhook-worker/tracing"
)

// stuckExporter holds every export until released or its context ends
// (a stalled collector), then fails it; it counts the spans it was given.
type stuckExporter struct {
	mu      sync.Mutex
	given   int
	calls   int
	release chan struct{}
}

func (e *stuckExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	e.given += len(spans)
	e.calls++
	e.mu.Unlock()
	select {
	case <-e.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *stuckExporter) Shutdown(context.Context) error { return nil }

func (e *stuckExporter) counts() (given, calls int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.given, e.calls
}

// endSpans ends n spans, failing the test if ending them waits.
func endSpans(t *testing.T, p *tracing.Provider, n int) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			_, span := p.Tracer().Start(context.Background(), "POST")
			span.End()
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("ending spans waited on the exporter")
	}
}

// A stalled collector never holds up the span's End: past the queue,
// spans are dropped and counted (queue_full); once the stalled exports
// give up, their spans are counted too (export_failed), and the next ones
// go out.
func TestStalledExportDropsAndCounts(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	exp := &stuckExporter{release: make(chan struct{})}
	p, err := tracing.New(tracing.Config{Exporter: exp, QueueSize: 4, BatchSize: 1, BatchDelay: time.Millisecond,
		ExportTimeout: time.Hour, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	endSpans(t, p, 1)
	waitfor.True(t, 10*time.Second, "the first export under way", func() bool { _, calls := exp.counts(); return calls == 1 })
	endSpans(t, p, 20) // 4 fit in the queue, 16 do not
	if got := dropped(t, reg, "queue_full"); got != 16 {
		t.Fatalf("queue_full = %v, want 16", got)
	}
	close(exp.release)
	waitfor.True(t, 10*time.Second, "the queued spans exported", func() bool { given, _ := exp.counts(); return given == 5 })
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := dropped(t, reg, "export_failed"); got != 0 {
		t.Fatalf("export_failed = %v, want 0", got)
	}
}

// failingExporter refuses every export.
type failingExporter struct{}

func (failingExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	return errors.New("collector says no")
}
func (failingExporter) Shutdown(context.Context) error { return nil }

// A refused export's spans are counted, and logged once (not once per
// export): a collector down for an hour writes one line a minute.
func TestFailedExportsCountedAndLoggedOnce(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(b)
	}), nil))
	p, err := tracing.New(tracing.Config{Exporter: failingExporter{}, BatchSize: 1, Registerer: reg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	endSpans(t, p, 5)
	waitfor.True(t, 10*time.Second, "5 spans counted", func() bool { return dropped(t, reg, "export_failed") == 5 })
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logs.String(), "tracing: export failed"); n != 1 {
		t.Fatalf("logged %d times, want once:\n%s", n, logs.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// Shutdown keeps to its deadline when the collector does not answer: the
// spans left are dropped and counted, and nothing waits on.
func TestShutdownKeepsItsDeadline(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	exp := &stuckExporter{release: make(chan struct{})}
	p, err := tracing.New(tracing.Config{Exporter: exp, BatchDelay: time.Hour, ExportTimeout: time.Hour, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	endSpans(t, p, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Shutdown(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown = %v, want the deadline", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not keep to its deadline")
	}
	waitfor.True(t, 10*time.Second, "the spans counted dropped", func() bool { return dropped(t, reg, "export_failed") == 3 })
}

// Spans of traces not sampled are never queued.
func TestUnsampledSpansNotExported(t *testing.T) {
	t.Parallel()
	exp := &stuckExporter{release: make(chan struct{})}
	close(exp.release)
	p, err := tracing.New(tracing.Config{Exporter: exp, Sampler: sdktrace.NeverSample(), BatchSize: 1, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	endSpans(t, p, 3)
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if given, _ := exp.counts(); given != 0 {
		t.Fatalf("exported %d spans of traces not sampled", given)
	}
}
