package main

import (
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/fluxora/webhook-worker/tracing"
)

// tracingEnv is validEnv with the OTEL_* variables of vars.
func tracingEnv(vars map[string]string) func(string) string {
	env := validEnv()
	for k, v := range vars {
		env[k] = v
	}
	return func(k string) string { return env[k] }
}

// Tracing is off without an endpoint, or with OTEL_SDK_DISABLED=true; off,
// the other variables are not read (values meant for other programs do
// not stop the worker).
func TestTracingOffUnlessAnEndpoint(t *testing.T) {
	t.Parallel()
	for _, vars := range []map[string]string{
		{},
		{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_TRACES_SAMPLER": "jaeger_remote"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_PROTOCOL": "bogus"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces", "OTEL_SDK_DISABLED": "TRUE"},
	} {
		c, err := loadConfig(tracingEnv(vars))
		if err != nil || c.TracingOn || tracingSummary(c) != "off" {
			t.Errorf("%v: on %v, err %v", vars, c.TracingOn, err)
		}
	}
}

// The endpoint, protocol, headers, timeouts, sampler, resource and queue
// as the specification reads them.
func TestTracingConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		vars     map[string]string
		endpoint string
		proto    tracing.Protocol
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, "http://127.0.0.1:4318/v1/traces", tracing.HTTPProtobuf},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector.example/otlp/"}, "https://collector.example/otlp/v1/traces", tracing.HTTPProtobuf},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/custom"},
			"http://127.0.0.1:9/custom", tracing.HTTPProtobuf},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "http://127.0.0.1:4317", tracing.GRPC},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, "http://127.0.0.1:4317", tracing.GRPC},
	} {
		c, err := loadConfig(tracingEnv(tc.vars))
		if err != nil || !c.TracingOn || c.Tracing.Endpoint != tc.endpoint || c.Tracing.Protocol != tc.proto {
			t.Errorf("%v: on %v endpoint %q protocol %q, err %v", tc.vars, c.TracingOn, c.Tracing.Endpoint, c.Tracing.Protocol, err)
		}
	}

	c, err := loadConfig(tracingEnv(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=a%2Cb%3D, x-tenant = t1",
		"OTEL_EXPORTER_OTLP_TIMEOUT": "2000", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "3000", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG": "0.25", "OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attrs,deployment.environment.name=prod%20eu",
		"OTEL_BSP_MAX_QUEUE_SIZE": "100", "OTEL_BSP_SCHEDULE_DELAY": "50", "OTEL_BSP_EXPORT_TIMEOUT": "1000",
	}))
	tr := c.Tracing
	if err != nil || tr.Headers["x-api-key"] != "a,b=" || tr.Headers["x-tenant"] != "t1" || tr.RequestTimeout != 3*time.Second ||
		tr.ServiceName != "from-attrs" || tr.QueueSize != 100 || tr.BatchSize != 100 || tr.BatchDelay != 50*time.Millisecond ||
		tr.ExportTimeout != time.Second || !strings.Contains(tr.Sampler.Description(), "TraceIDRatioBased{0.25}") {
		t.Fatalf("config %+v, sampler %s, err %v", tr, tr.Sampler.Description(), err)
	}
	if !hasAttr(tr.Attributes, attribute.String("deployment.environment.name", "prod eu")) {
		t.Errorf("resource attributes %v", tr.Attributes)
	}
	if s := tracingSummary(c); s != "http/protobuf http://127.0.0.1:4318" {
		t.Errorf("summary %q", s)
	}

	c, _ = loadConfig(tracingEnv(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
		"OTEL_SERVICE_NAME": "payments-webhooks", "OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attrs"}))
	if c.Tracing.ServiceName != "payments-webhooks" || !strings.Contains(c.Tracing.Sampler.Description(), "ParentBased{root:AlwaysOnSampler") {
		t.Errorf("OTEL_SERVICE_NAME: %q, default sampler %s", c.Tracing.ServiceName, c.Tracing.Sampler.Description())
	}
	c, _ = loadConfig(tracingEnv(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}))
	if c.Tracing.ServiceName != tracing.ServiceNameDefault || c.Tracing.QueueSize != tracing.QueueSizeDefault {
		t.Errorf("defaults: %+v", c.Tracing)
	}
}

func hasAttr(attrs []attribute.KeyValue, want attribute.KeyValue) bool {
	for _, a := range attrs {
		if a == want {
			return true
		}
	}
	return false
}

// A bad value is refused, naming the variable, and never printing a
// header's value or an endpoint's credentials.
func TestTracingConfigRejectsBadValues(t *testing.T) {
	t.Parallel()
	on := "http://127.0.0.1:4318"
	for _, tc := range []struct {
		name, value string
	}{
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"},
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "thrift"},
		{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "GRPC"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4318"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://127.0.0.1/"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://user:s3cretpw@127.0.0.1:4318"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "x-api-key"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "bad name=s3cretpw"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=s3cretpw%zz"},
		{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-api-key=s3cretpw%0A"},
		{"OTEL_EXPORTER_OTLP_TIMEOUT", "10s"},
		{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "0"},
		{"OTEL_TRACES_SAMPLER", "jaeger_remote"},
		{"OTEL_TRACES_SAMPLER_ARG", "1.5"},
		{"OTEL_TRACES_SAMPLER_ARG", "half"},
		{"OTEL_RESOURCE_ATTRIBUTES", "team"},
		{"OTEL_RESOURCE_ATTRIBUTES", "=x"},
		{"OTEL_BSP_MAX_QUEUE_SIZE", "0"},
		{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "5000"},
		{"OTEL_BSP_SCHEDULE_DELAY", "-1"},
		{"OTEL_BSP_EXPORT_TIMEOUT", "soon"},
		{"OTEL_SDK_DISABLED", "maybe"},
	} {
		vars := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": on, tc.name: tc.value}
		if strings.HasPrefix(tc.value, "http://") && tc.name == "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" {
			vars["OTEL_EXPORTER_OTLP_ENDPOINT"] = ""
		}
		if tc.name == "OTEL_TRACES_SAMPLER_ARG" {
			vars["OTEL_TRACES_SAMPLER"] = "traceidratio"
		}
		_, err := loadConfig(tracingEnv(vars))
		if err == nil || !strings.Contains(err.Error(), tc.name+":") {
			t.Errorf("%s=%q: %v, want an error naming it", tc.name, tc.value, err)
			continue
		}
		if strings.Contains(err.Error(), "s3cretpw") {
			t.Errorf("%s: the error prints the secret: %v", tc.name, err)
		}
	}
}
