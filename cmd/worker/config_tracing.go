package main

import (
	"cmp"
	"math"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"golang.org/x/net/http/httpguts"

	"github.com/fluxora/webhook-worker/tracing"
)

// The OTLP exporter's limits of the variables in milliseconds.
const otelMillisMax = 3600 * 1000

// tracingConfig reads the standard OpenTelemetry variables (README,
// "Tracing"). Tracing is on when an endpoint is set
// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT) and
// OTEL_SDK_DISABLED is not true; only then are the other variables read
// and checked, so that values meant for other programs do not stop a
// worker that does not trace.
func (e *env) tracingConfig() (cfg tracing.Config, on bool) {
	disabled := e.bool("OTEL_SDK_DISABLED", false)
	traces := strings.TrimSpace(e.getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
	base := strings.TrimSpace(e.getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	if disabled || traces == "" && base == "" {
		return cfg, false
	}
	cfg.Protocol = e.otlpProtocol()
	cfg.Endpoint = e.otlpEndpoint(cfg.Protocol, traces, base)
	cfg.Headers = e.otlpHeaders()
	cfg.RequestTimeout = e.millis("OTEL_EXPORTER_OTLP_TIMEOUT", tracing.RequestTimeoutDefault, 1, otelMillisMax)
	if strings.TrimSpace(e.getenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")) != "" {
		cfg.RequestTimeout = e.millis("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", cfg.RequestTimeout, 1, otelMillisMax)
	}
	cfg.Sampler = e.sampler()
	var service string
	cfg.Attributes, service = e.resourceAttributes()
	cfg.ServiceName = cmp.Or(strings.TrimSpace(e.getenv("OTEL_SERVICE_NAME")), service, tracing.ServiceNameDefault)
	cfg.QueueSize = e.int("OTEL_BSP_MAX_QUEUE_SIZE", tracing.QueueSizeDefault, 1, 1_000_000)
	cfg.BatchSize = e.int("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", min(tracing.BatchSizeDefault, cfg.QueueSize), 1, 1_000_000)
	if cfg.BatchSize > cfg.QueueSize {
		e.fail("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "must be at most OTEL_BSP_MAX_QUEUE_SIZE (%d), got %d", cfg.QueueSize, cfg.BatchSize)
	}
	cfg.BatchDelay = e.millis("OTEL_BSP_SCHEDULE_DELAY", tracing.BatchDelayDefault, 1, otelMillisMax)
	cfg.ExportTimeout = e.millis("OTEL_BSP_EXPORT_TIMEOUT", tracing.ExportTimeoutDefault, 1, otelMillisMax)
	return cfg, true
}

// otlpProtocol reads OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL: grpc or http/protobuf (the default).
func (e *env) otlpProtocol() tracing.Protocol {
	name, v := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", strings.TrimSpace(e.getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if v == "" {
		name, v = "OTEL_EXPORTER_OTLP_PROTOCOL", strings.TrimSpace(e.getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	switch p := tracing.Protocol(v); p {
	case "":
		return tracing.HTTPProtobuf
	case tracing.HTTPProtobuf, tracing.GRPC:
		return p
	}
	e.fail(name, "must be grpc or http/protobuf (http/json is not supported), got %q", v)
	return tracing.HTTPProtobuf
}

// otlpEndpoint is the exporter's URL: traces
// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) as it is, else base
// (OTEL_EXPORTER_OTLP_ENDPOINT) with /v1/traces added to its path for
// http/protobuf. Either is an http:// or https:// URL with a host and
// without credentials (they go in OTEL_EXPORTER_OTLP_HEADERS); the value
// is never printed.
func (e *env) otlpEndpoint(p tracing.Protocol, traces, base string) string {
	name, v := "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", traces
	if v == "" {
		name, v = "OTEL_EXPORTER_OTLP_ENDPOINT", base
	}
	u, err := url.Parse(v)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		e.fail(name, "must be an http:// or https:// URL with a host (e.g. http://127.0.0.1:4318)")
		return ""
	case u.User != nil:
		e.fail(name, "must not contain credentials: give them in OTEL_EXPORTER_OTLP_HEADERS")
		return ""
	}
	if traces == "" && p == tracing.HTTPProtobuf {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
		u.RawPath = ""
	}
	return u.String()
}

// otlpHeaders reads OTEL_EXPORTER_OTLP_TRACES_HEADERS, else
// OTEL_EXPORTER_OTLP_HEADERS: comma-separated name=value pairs, values
// percent-encoded. A problem names the entry, never its value (an API
// key, usually).
func (e *env) otlpHeaders() map[string]string {
	name, v := "OTEL_EXPORTER_OTLP_TRACES_HEADERS", e.getenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
	if strings.TrimSpace(v) == "" {
		name, v = "OTEL_EXPORTER_OTLP_HEADERS", e.getenv("OTEL_EXPORTER_OTLP_HEADERS")
	}
	pairs, bad := keyValues(v)
	if bad > 0 {
		e.fail(name, "entry %d must be name=value, the name an HTTP header name and the value percent-encoded without control characters (values are never printed)", bad)
		return nil
	}
	out := make(map[string]string, len(pairs))
	for i, kv := range pairs {
		if !httpguts.ValidHeaderFieldName(kv[0]) || strings.IndexFunc(kv[1], unicode.IsControl) >= 0 {
			e.fail(name, "entry %d must be name=value, the name an HTTP header name and the value percent-encoded without control characters (values are never printed)", i+1)
			return nil
		}
		out[kv[0]] = kv[1]
	}
	return out
}

// sampler reads OTEL_TRACES_SAMPLER (default parentbased_always_on) and
// OTEL_TRACES_SAMPLER_ARG, checked only for the ratio samplers that use
// it (0 to 1, default 1).
func (e *env) sampler() sdktrace.Sampler {
	arg := strings.TrimSpace(e.getenv("OTEL_TRACES_SAMPLER_ARG"))
	ratio := func() float64 {
		v := arg
		if v == "" {
			return 1
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || f < 0 || f > 1 {
			e.fail("OTEL_TRACES_SAMPLER_ARG", "must be a number from 0 to 1 (the ratio of traces sampled), got %q", v)
			return 1
		}
		return f
	}
	switch v := strings.ToLower(strings.TrimSpace(e.getenv("OTEL_TRACES_SAMPLER"))); v {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample())
	case "always_on":
		return sdktrace.AlwaysSample()
	case "always_off":
		return sdktrace.NeverSample()
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio())
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio()))
	default:
		e.fail("OTEL_TRACES_SAMPLER", "must be always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio, got %q", v)
		return nil
	}
}

// resourceAttributes reads OTEL_RESOURCE_ATTRIBUTES (comma-separated
// key=value pairs, values percent-encoded) and returns them with the
// service.name among them ("" for none).
func (e *env) resourceAttributes() ([]attribute.KeyValue, string) {
	pairs, bad := keyValues(e.getenv("OTEL_RESOURCE_ATTRIBUTES"))
	if bad > 0 {
		e.fail("OTEL_RESOURCE_ATTRIBUTES", "entry %d must be key=value, the value percent-encoded (e.g. deployment.environment.name=prod,team=payments)", bad)
		return nil, ""
	}
	var attrs []attribute.KeyValue
	service := ""
	for _, kv := range pairs {
		attrs = append(attrs, attribute.String(kv[0], kv[1]))
		if kv[0] == "service.name" {
			service = kv[1]
		}
	}
	return attrs, service
}

// keyValues splits "k1=v1,k2=v2" (the W3C baggage form of the OTEL_*
// lists): keys and values trimmed, values percent-decoded, empty entries
// skipped. bad is the number (from 1) of the first entry that is not
// key=value with a key and a value that decodes, 0 when all are.
func keyValues(v string) (pairs [][2]string, bad int) {
	for i, entry := range strings.Split(v, ",") {
		if strings.TrimSpace(entry) == "" {
			continue
		}
		k, val, ok := strings.Cut(entry, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, i + 1
		}
		decoded, err := url.PathUnescape(strings.TrimSpace(val))
		if err != nil {
			return nil, i + 1
		}
		pairs = append(pairs, [2]string{k, decoded})
	}
	return pairs, 0
}

// tracingSummary is the start-up log's word on tracing: "off", or the
// protocol and the collector's scheme and host (never its path, query or
// headers).
func tracingSummary(c config) string {
	if !c.TracingOn {
		return "off"
	}
	u, err := url.Parse(c.Tracing.Endpoint)
	if err != nil {
		return string(c.Tracing.Protocol)
	}
	return string(c.Tracing.Protocol) + " " + u.Scheme + "://" + u.Host
}
