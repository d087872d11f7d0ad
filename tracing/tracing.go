// Package tracing builds the worker's OpenTelemetry tracer: an SDK tracer
// provider that exports spans over OTLP (HTTP/protobuf or gRPC) through a
// bounded queue, so that a slow or unreachable collector never slows a
// delivery: what the queue cannot take is dropped and counted
// (fluxora_webhook_trace_spans_dropped_total).
//
// The package makes no span itself (the sender makes one per attempt, with
// the trace.Tracer that Tracer returns) and sets no global: the provider
// is handed to whoever needs it. cmd/worker builds it from the standard
// OTEL_* variables; without an endpoint it is not built at all, and the
// sender is given no tracer.
package tracing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Protocol is the OTLP transport.
type Protocol string

// The protocols of OTEL_EXPORTER_OTLP_PROTOCOL.
const (
	HTTPProtobuf Protocol = "http/protobuf"
	GRPC         Protocol = "grpc"
)

// Defaults of Config, those of the OpenTelemetry specification for the
// batch span processor (OTEL_BSP_*) and the OTLP exporter.
const (
	// ServiceNameDefault is the default Config.ServiceName.
	ServiceNameDefault = "fluxora-webhook-worker"
	// QueueSizeDefault is the default Config.QueueSize.
	QueueSizeDefault = 2048
	// BatchSizeDefault is the default Config.BatchSize.
	BatchSizeDefault = 512
	// BatchDelayDefault is the default Config.BatchDelay.
	BatchDelayDefault = 5 * time.Second
	// ExportTimeoutDefault is the default Config.ExportTimeout.
	ExportTimeoutDefault = 30 * time.Second
	// RequestTimeoutDefault is the default Config.RequestTimeout.
	RequestTimeoutDefault = 10 * time.Second
)

// InstrumentationName names the tracer of the worker's spans (their
// instrumentation scope).
const InstrumentationName = "github.com/fluxora/webhook-worker"

// Config configures a Provider.
type Config struct {
	// Endpoint is where spans go. For HTTPProtobuf the whole URL of the
	// traces resource (http://collector:4318/v1/traces); for GRPC the
	// collector's scheme, host and port (http:// is plaintext, https://
	// TLS). Required.
	Endpoint string
	// Protocol is HTTPProtobuf (the default) or GRPC.
	Protocol Protocol
	// Headers are sent with every export (e.g. an API key). Never logged.
	Headers map[string]string
	// RequestTimeout bounds one export request. Defaults to 10s
	// (RequestTimeoutDefault).
	RequestTimeout time.Duration
	// Sampler decides which traces are recorded. Defaults to
	// ParentBased(AlwaysSample()), the specification's default.
	Sampler sdktrace.Sampler
	// ServiceName is the resource's service.name. Defaults to
	// "fluxora-webhook-worker" (ServiceNameDefault).
	ServiceName string
	// ServiceVersion, when set, is the resource's service.version.
	ServiceVersion string
	// Attributes are the resource's other attributes
	// (OTEL_RESOURCE_ATTRIBUTES); ServiceName wins over a service.name
	// among them.
	Attributes []attribute.KeyValue
	// QueueSize is how many ended spans wait for export at most: past it,
	// spans are dropped and counted. Defaults to 2048 (QueueSizeDefault).
	QueueSize int
	// BatchSize is the most spans of one export. Defaults to 512
	// (BatchSizeDefault); at most QueueSize.
	BatchSize int
	// BatchDelay is the longest a span waits for its batch to fill.
	// Defaults to 5s (BatchDelayDefault).
	BatchDelay time.Duration
	// ExportTimeout bounds one export, its retries included. Defaults to
	// 30s (ExportTimeoutDefault).
	ExportTimeout time.Duration
	// Registerer registers the drop counter. Required.
	Registerer prometheus.Registerer
	// Logger tells of failed exports, at most once a minute. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// Exporter, when set, replaces the OTLP exporter (tests); Endpoint
	// and Protocol are then ignored.
	Exporter sdktrace.SpanExporter
}

// Provider is the worker's tracer provider and its export queue.
type Provider struct {
	tp *sdktrace.TracerProvider
}

// New returns a Provider exporting to cfg.Endpoint, or an error naming
// the field. The exporter connects on its first export: a collector down
// at start is not an error.
func New(cfg Config) (*Provider, error) {
	cfg, err := withDefaults(cfg)
	if err != nil {
		return nil, err
	}
	exp := cfg.Exporter
	if exp == nil {
		if exp, err = newExporter(cfg); err != nil {
			return nil, err
		}
	}
	res := resource.NewSchemaless(resourceAttributes(cfg)...)
	proc := newProcessor(exp, cfg, newMetrics(cfg.Registerer))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(proc), sdktrace.WithResource(res),
		sdktrace.WithSampler(cfg.Sampler))
	return &Provider{tp: tp}, nil
}

// withDefaults applies the defaults and validates cfg.
func withDefaults(cfg Config) (Config, error) {
	cfg.Protocol = cmp.Or(cfg.Protocol, HTTPProtobuf)
	cfg.ServiceName = cmp.Or(cfg.ServiceName, ServiceNameDefault)
	cfg.QueueSize = cmp.Or(cfg.QueueSize, QueueSizeDefault)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, min(BatchSizeDefault, cfg.QueueSize))
	cfg.BatchDelay = cmp.Or(cfg.BatchDelay, BatchDelayDefault)
	cfg.ExportTimeout = cmp.Or(cfg.ExportTimeout, ExportTimeoutDefault)
	cfg.RequestTimeout = cmp.Or(cfg.RequestTimeout, RequestTimeoutDefault)
	if cfg.Sampler == nil {
		cfg.Sampler = sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var errs []error
	if cfg.Exporter == nil {
		if u, err := url.Parse(cfg.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, errors.New("tracing: Endpoint: must be an http:// or https:// URL with a host"))
		}
		if cfg.Protocol != HTTPProtobuf && cfg.Protocol != GRPC {
			errs = append(errs, fmt.Errorf("tracing: Protocol: must be %s or %s", HTTPProtobuf, GRPC))
		}
	}
	if cfg.QueueSize < 0 || cfg.BatchSize < 0 || cfg.BatchSize > cfg.QueueSize {
		errs = append(errs, errors.New("tracing: QueueSize, BatchSize: must not be negative, BatchSize at most QueueSize"))
	}
	if cfg.BatchDelay < 0 || cfg.ExportTimeout < 0 || cfg.RequestTimeout < 0 {
		errs = append(errs, errors.New("tracing: BatchDelay, ExportTimeout, RequestTimeout: must not be negative"))
	}
	if cfg.Registerer == nil {
		errs = append(errs, errors.New("tracing: Registerer: is required"))
	}
	return cfg, errors.Join(errs...)
}

// newExporter makes the OTLP exporter of cfg.Protocol. Options given here
// win over the OTEL_* variables the exporter reads itself.
func newExporter(cfg Config) (sdktrace.SpanExporter, error) {
	ctx := context.Background() // the exporters dial lazily: nothing to cancel
	if cfg.Protocol == GRPC {
		return otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(cfg.Endpoint),
			otlptracegrpc.WithHeaders(cfg.Headers), otlptracegrpc.WithTimeout(cfg.RequestTimeout))
	}
	return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(cfg.Endpoint),
		otlptracehttp.WithHeaders(cfg.Headers), otlptracehttp.WithTimeout(cfg.RequestTimeout))
}

// resourceAttributes are the resource's: cfg.Attributes, then the
// service's name and version, then the SDK's.
func resourceAttributes(cfg Config) []attribute.KeyValue {
	attrs := append([]attribute.KeyValue(nil), cfg.Attributes...)
	attrs = append(attrs, semconv.ServiceName(cfg.ServiceName))
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, semconv.ServiceVersion(cfg.ServiceVersion))
	}
	return append(attrs, semconv.TelemetrySDKLanguageGo, semconv.TelemetrySDKName("opentelemetry"),
		semconv.TelemetrySDKVersion(sdk.Version()))
}

// Tracer is the tracer of the worker's spans.
func (p *Provider) Tracer() trace.Tracer {
	return p.tp.Tracer(InstrumentationName)
}

// Shutdown exports the spans still queued, until ctx ends (those left are
// dropped and counted), and stops the exporter. Spans ended afterwards are
// dropped.
func (p *Provider) Shutdown(ctx context.Context) error {
	return p.tp.Shutdown(ctx)
}
