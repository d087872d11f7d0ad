package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/fluxora/webhook-worker/internal/otlpsink"
	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
	"github.com/fluxora/webhook-worker/producer"
)

// The producer's trace of these tests: testTraceparent's ids, and a
// tracestate.
const (
	producerTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	producerSpanID  = "00f067aa0ba902b7"
	producerState   = "vendor=opaque,other=1"
	// payloadMarker and queryMarker must appear in no attribute.
	payloadMarker = "card-4111-payload-marker"
	queryMarker   = "query-marker-token"
)

// tracedEnv is baseEnv exporting to sink over proto, with a short batch
// delay, and with the WEBHOOK_URL endpoint's URL given a query.
func tracedEnv(db *testdb.DB, c *consumer, sink *otlpsink.Sink, proto string, overrides map[string]string) map[string]string {
	env := baseEnv(db, c, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": sink.Endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": proto, "OTEL_BSP_SCHEDULE_DELAY": "20",
	})
	if c != nil {
		env["WEBHOOK_URL"] = c.srv.URL + "/hooks/in?token=" + queryMarker
	}
	for k, v := range overrides {
		env[k] = v
	}
	return env
}

// insertTraced inserts an event with the producer's traceparent and
// tracestate among its headers, due 3 s ago.
func insertTraced(t *testing.T, db *testdb.DB) {
	t.Helper()
	headers := fmt.Sprintf(`{"traceparent": %q, "tracestate": %q, "X-Correlation-Id": "c-1"}`, testTraceparent, producerState)
	_, err := db.Pool.Exec(context.Background(), `INSERT INTO webhook_outbox (event_type, payload, headers, created_at)
		VALUES ('invoice.paid', $1::jsonb, $2::jsonb, now() - interval '3 seconds')`, `{"card": "`+payloadMarker+`"}`, headers)
	if err != nil {
		t.Fatal(err)
	}
}

// spanOf returns the span of attempt n among spans.
func spanOf(t *testing.T, spans []otlpsink.Span, n int) otlpsink.Span {
	t.Helper()
	for _, s := range spans {
		if s.Attrs["webhook.attempt"] == int64(n) {
			return s
		}
	}
	t.Fatalf("no span of attempt %d among %+v", n, spans)
	return otlpsink.Span{}
}

// noSecretsIn fails the test when an attribute of a span or its resource
// holds the secret, the payload, a signature the consumer received or the
// URL's query.
func noSecretsIn(t *testing.T, spans []otlpsink.Span, seen []seenRequest) {
	t.Helper()
	forbidden := []string{testSecret, payloadMarker, queryMarker, "token="}
	for _, r := range seen {
		forbidden = append(forbidden, r.Header.Get("X-Fluxora-Signature"))
		for _, v := range strings.Fields(r.Header.Get("Webhook-Signature")) {
			forbidden = append(forbidden, strings.TrimPrefix(v, "v1,"))
		}
	}
	for _, s := range spans {
		for _, attrs := range []map[string]any{s.Attrs, s.Resource} {
			for k, v := range attrs {
				for _, f := range forbidden {
					if f != "" && strings.Contains(fmt.Sprint(v), f) {
						t.Errorf("attribute %s = %v holds %q", k, v, f)
					}
				}
			}
		}
	}
}

// A real worker exporting over OTLP/HTTP: the consumer answers 503, then
// 200. Both attempts are client spans of the producer's trace, children of
// the producer's span (its traceparent in the event's headers), numbered 1
// and 2, attributed by the HTTP client conventions; the consumer saw each
// attempt's own span as traceparent, and the producer's tracestate; no
// attribute holds the secret, the payload, a signature or the URL's query.
func TestTracesContinueTheProducersTraceAcrossARetry(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	sink := otlpsink.NewHTTP(t)
	c := newHeaderConsumer(t, failFirst())
	startProcess(t, tracedEnv(db, c.consumer, sink, "http/protobuf", nil))
	insertTraced(t, db)
	waitProcessed(t, db, 1, 20*time.Second)
	spans := sink.WaitSpans(t, 2, 20*time.Second)
	seen := c.requests()
	if len(spans) != 2 || len(seen) != 2 {
		t.Fatalf("%d spans, %d requests; want 2 of each", len(spans), len(seen))
	}
	port := c.srv.Listener.Addr().(*net.TCPAddr).Port
	for n := 1; n <= 2; n++ {
		s, r := spanOf(t, spans, n), seen[n-1]
		if s.TraceID != producerTraceID || s.ParentSpanID != producerSpanID || s.Name != "POST" ||
			s.Kind != tracepb.Span_SPAN_KIND_CLIENT || s.TraceState != producerState {
			t.Errorf("attempt %d: span %+v, want a client span POST, child of %s in trace %s", n, s, producerSpanID, producerTraceID)
		}
		if r.Attempt != fmt.Sprint(n) || r.Header.Get("Traceparent") != "00-"+producerTraceID+"-"+s.SpanID+"-01" ||
			r.Header.Get("Tracestate") != producerState || r.Header.Get("X-Correlation-Id") != "c-1" {
			t.Errorf("attempt %d: the consumer saw traceparent %q, tracestate %q, x-correlation-id %q; the span is %s", n,
				r.Header.Get("Traceparent"), r.Header.Get("Tracestate"), r.Header.Get("X-Correlation-Id"), s.SpanID)
		}
		for k, want := range map[string]any{"http.request.method": "POST", "server.address": "127.0.0.1",
			"server.port": int64(port), "url.full": fmt.Sprintf("http://127.0.0.1:%d/hooks/in", port),
			"webhook.delivery_id": r.ID, "webhook.event_type": "invoice.paid", "webhook.endpoint": "default"} {
			if s.Attrs[k] != want {
				t.Errorf("attempt %d: %s = %v, want %v", n, k, s.Attrs[k], want)
			}
		}
	}
	first, second := spanOf(t, spans, 1), spanOf(t, spans, 2)
	if first.Attrs["http.response.status_code"] != int64(503) || first.Attrs["error.type"] != "503" ||
		first.StatusCode != tracepb.Status_STATUS_CODE_ERROR || first.StatusMessage != "retryable" {
		t.Errorf("attempt 1 (503): %+v", first)
	}
	if second.Attrs["http.response.status_code"] != int64(200) || second.Attrs["error.type"] != nil ||
		second.StatusCode != tracepb.Status_STATUS_CODE_UNSET {
		t.Errorf("attempt 2 (200): %+v", second)
	}
	if w, _ := first.Attrs["webhook.wait_ms"].(int64); w < 3000 {
		t.Errorf("attempt 1 waited %v ms, want at least the 3 s it was overdue", first.Attrs["webhook.wait_ms"])
	}
	if first.Resource["service.name"] != "fluxora-webhook-worker" || first.Scope == "" {
		t.Errorf("resource %v, scope %q", first.Resource, first.Scope)
	}
	noSecretsIn(t, spans, seen)
}

// Over OTLP/gRPC, to a table endpoint, from an event the Go producer kit
// wrote with the caller's trace: the attempt is a child of the caller's
// span. The batch delay is an hour: the span goes out at SIGTERM.
func TestTracesOverGRPCFlushedAtSIGTERM(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	sink := otlpsink.NewGRPC(t)
	c := newHeaderConsumer(t, nil)
	addEndpoint(t, db, "billing", c.consumer)
	env := endpointsOnly(db, nil)
	for k, v := range tracedEnv(db, nil, sink, "grpc", map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "3600000"}) {
		if strings.HasPrefix(k, "OTEL_") {
			env[k] = v
		}
	}
	p := startProcess(t, env)
	tid, _ := trace.TraceIDFromHex(producerTraceID)
	sid, _ := trace.SpanIDFromHex(producerSpanID)
	ctx := trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	if _, err := producer.Enqueue(ctx, db.Pool, "invoice.paid", []byte(`{"n": 1}`)); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, 20*time.Second, "delivered", func() bool {
		return len(c.requests()) == 1 && db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed") == 0
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 20*time.Second); code != exitOK {
		t.Fatalf("exit code %d", code)
	}
	spans := sink.Spans()
	if len(spans) != 1 {
		t.Fatalf("%d spans after SIGTERM, want 1", len(spans))
	}
	s, r := spans[0], c.requests()[0]
	if s.TraceID != producerTraceID || s.ParentSpanID != producerSpanID || s.Attrs["webhook.endpoint"] != "billing" ||
		r.Header.Get("Traceparent") != "00-"+producerTraceID+"-"+s.SpanID+"-01" {
		t.Fatalf("span %+v; the consumer saw traceparent %q", s, r.Header.Get("Traceparent"))
	}
}

// A collector that holds every export, or refuses connections, never holds
// up a delivery: every event is delivered, and the spans the small queue
// cannot take (OTEL_BSP_MAX_QUEUE_SIZE) or the exports that fail are
// counted; the worker still stops in time at SIGTERM.
func TestTracingCollectorDownNeverHoldsDeliveries(t *testing.T) {
	t.Parallel()
	const events = 40
	for _, tc := range []struct {
		name, reason string
		endpoint     func(t *testing.T) string
	}{
		{"stalled", "queue_full", func(t *testing.T) string {
			sink := otlpsink.NewHTTP(t)
			sink.Hold()
			return sink.Endpoint
		}},
		{"refusing", "export_failed", func(t *testing.T) string {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			return "http://" + ln.Addr().String()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := testdb.New(t)
			c := newConsumer(t, nil)
			env := baseEnv(db, c, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": tc.endpoint(t), "OTEL_BSP_MAX_QUEUE_SIZE": "2",
				"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "1", "OTEL_BSP_SCHEDULE_DELAY": "10", "OTEL_EXPORTER_OTLP_TIMEOUT": "60000",
				"OTEL_BSP_EXPORT_TIMEOUT": "60000"})
			p := startProcess(t, env)
			base := startedWorker(t, p.logs)
			insertTx(t, db, events)
			waitProcessed(t, db, events, 30*time.Second)
			deliveredOnceEach(t, c, events)
			sample := `fluxora_webhook_trace_spans_dropped_total{reason="` + tc.reason + `"}`
			waitfor.True(t, 20*time.Second, sample+" counts", func() bool { return metricValue(t, base, sample) > 0 })
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := p.wait(t, 20*time.Second); code != exitOK {
				t.Fatalf("exit code %d", code)
			}
		})
	}
}

// OTEL_SDK_DISABLED=true turns tracing off whatever the endpoint: the
// event's headers go out exactly as written, and nothing is exported.
func TestTracingDisabled(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	sink := otlpsink.NewHTTP(t)
	c := newHeaderConsumer(t, nil)
	p := startProcess(t, tracedEnv(db, c.consumer, sink, "http/protobuf", map[string]string{"OTEL_SDK_DISABLED": "true"}))
	base := startedWorker(t, p.logs)
	enqueueWithHeaders(t, db, "invoice.paid")
	waitProcessed(t, db, 1, 20*time.Second)
	checkHeaders(t, "disabled", c.requests()[0])
	if code, body := httpGet(base + "/metrics"); code != http.StatusOK || strings.Contains(body, "fluxora_webhook_trace_") {
		t.Errorf("/metrics %d shows the tracing metric while tracing is off", code)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 20*time.Second); code != exitOK {
		t.Fatalf("exit code %d", code)
	}
	if n := sink.Exports(); n != 0 {
		t.Fatalf("%d exports while tracing is disabled", n)
	}
	if !strings.Contains(p.logs.String(), `"tracing":"off"`) {
		t.Errorf("the start-up log does not say tracing is off:\n%s", p.logs.String())
	}
}

// A bad protocol stops the worker at start with exit 2, naming the
// variable.
func TestTracingBadProtocolExits2(t *testing.T) {
	t.Parallel()
	env := envFor("postgres://postgres@127.0.0.1:1/none", nil, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
	p := startProcess(t, env)
	if code := p.wait(t, 20*time.Second); code != exitUsage {
		t.Fatalf("exit code %d, want %d", code, exitUsage)
	}
	if !strings.Contains(p.logs.String(), "OTEL_EXPORTER_OTLP_PROTOCOL: must be grpc or http/protobuf") {
		t.Fatalf("the error does not name the variable:\n%s", p.logs.String())
	}
}
