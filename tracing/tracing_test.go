package tracing_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/attribute"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/fluxora/webhook-worker/internal/otlpsink"
	"github.com/fluxora/webhook-worker/tracing"
)

// The provider exports to a real OTLP receiver over either protocol: the
// span with its attributes, the resource (service name and version, the
// operator's attributes) and the worker's instrumentation scope.
func TestExportsOverOTLP(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		proto tracing.Protocol
		sink  func(testing.TB) *otlpsink.Sink
		path  string
	}{
		{tracing.HTTPProtobuf, otlpsink.NewHTTP, "/v1/traces"},
		{tracing.GRPC, otlpsink.NewGRPC, ""},
	} {
		t.Run(string(tc.proto), func(t *testing.T) {
			t.Parallel()
			sink := tc.sink(t)
			p, err := tracing.New(tracing.Config{Endpoint: sink.Endpoint + tc.path, Protocol: tc.proto,
				Headers: map[string]string{"x-api-key": "k"}, ServiceVersion: "v9.9.9", BatchDelay: 10 * time.Millisecond,
				Attributes: []attribute.KeyValue{attribute.String("deployment.environment.name", "test")},
				Registerer: prometheus.NewRegistry()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
			_, span := p.Tracer().Start(t.Context(), "POST")
			span.SetAttributes(attribute.Int("webhook.attempt", 2))
			span.End()
			got := sink.WaitSpans(t, 1, 10*time.Second)[0]
			if got.Name != "POST" || got.Attrs["webhook.attempt"] != int64(2) || got.Scope != tracing.InstrumentationName {
				t.Errorf("span = %+v", got)
			}
			for k, want := range map[string]any{"service.name": tracing.ServiceNameDefault, "service.version": "v9.9.9",
				"deployment.environment.name": "test", "telemetry.sdk.language": "go"} {
				if got.Resource[k] != want {
					t.Errorf("resource %s = %v, want %v", k, got.Resource[k], want)
				}
			}
		})
	}
}

// Shutdown exports what is queued, however long the batch delay: the
// worker's last spans are not lost at SIGTERM.
func TestShutdownFlushes(t *testing.T) {
	t.Parallel()
	sink := otlpsink.NewHTTP(t)
	p, err := tracing.New(tracing.Config{Endpoint: sink.Endpoint + "/v1/traces", BatchDelay: time.Hour, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, span := p.Tracer().Start(t.Context(), "POST")
		span.End()
	}
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(sink.Spans()); n != 3 {
		t.Fatalf("received %d spans, want 3", n)
	}
	if k := sink.Spans()[0].Kind; k != tracepb.Span_SPAN_KIND_INTERNAL {
		t.Fatalf("kind %v: the test's span is the default kind", k)
	}
}

// New names the fields it refuses.
func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	for _, tc := range []struct {
		cfg  tracing.Config
		want string
	}{
		{tracing.Config{Endpoint: "127.0.0.1:4318", Registerer: reg}, "Endpoint"},
		{tracing.Config{Endpoint: "ftp://127.0.0.1/", Registerer: reg}, "Endpoint"},
		{tracing.Config{Endpoint: "http://127.0.0.1:4318", Protocol: "http/json", Registerer: reg}, "Protocol"},
		{tracing.Config{Endpoint: "http://127.0.0.1:4318", QueueSize: 2, BatchSize: 3, Registerer: reg}, "BatchSize"},
		{tracing.Config{Endpoint: "http://127.0.0.1:4318", BatchDelay: -1, Registerer: reg}, "BatchDelay"},
		{tracing.Config{Endpoint: "http://127.0.0.1:4318"}, "Registerer"},
	} {
		if _, err := tracing.New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error naming %s", tc.cfg, err, tc.want)
		}
	}
}

// dropped is the drop counter's value for reason.
func dropped(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "fluxora_webhook_trace_spans_dropped_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no fluxora_webhook_trace_spans_dropped_total{reason=%q}", reason)
	return 0
}

// Both reasons are there from the start, at 0.
func TestDropCounterRegistered(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	p, err := tracing.New(tracing.Config{Endpoint: "http://127.0.0.1:1/v1/traces", Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	if n := testutil.CollectAndCount(reg, "fluxora_webhook_trace_spans_dropped_total"); n != 2 {
		t.Fatalf("%d series, want 2", n)
	}
	if dropped(t, reg, "queue_full") != 0 || dropped(t, reg, "export_failed") != 0 {
		t.Fatal("counters not at 0")
	}
}
