package sender_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/fluxora/webhook-worker/sender"
	"github.com/fluxora/webhook-worker/webhook"
)

// The producer's trace of these tests.
const (
	producerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	producerSpan  = "00f067aa0ba902b7"
	producerState = "vendor=opaque,other=1"
	traceSecret   = "whsec_trace_secret_value"
	tracePayload  = `{"card":"4111-payload-marker"}`
	traceQuery    = "token=query-marker"
)

// tracedSetup is a PerEndpoint whose WEBHOOK_URL endpoint (with a query)
// answers with respond and keeps each request's headers, and the recorder
// of its spans.
type tracedSetup struct {
	p    *sender.PerEndpoint
	rec  *tracetest.SpanRecorder
	mu   sync.Mutex
	seen []http.Header
	url  string
}

func newTraced(t *testing.T, respond int) *tracedSetup {
	t.Helper()
	ts := &tracedSetup{rec: tracetest.NewSpanRecorder()}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		ts.seen = append(ts.seen, r.Header.Clone())
		ts.mu.Unlock()
		w.WriteHeader(respond)
	}))
	t.Cleanup(srv.Close)
	ts.url = srv.URL + "/hooks/in?" + traceQuery
	env, err := sender.New(sender.Config{URL: ts.url, Secret: []byte(traceSecret)})
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(ts.rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ts.p, err = sender.NewPerEndpoint(sender.PerEndpointConfig{Env: env, Tracer: tp.Tracer("test")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.p.Close)
	return ts
}

func (ts *tracedSetup) headers() []http.Header {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.seen
}

// tracedDelivery is attempt n of a WEBHOOK_URL delivery due 2 s ago, with
// the producer's traceparent and tracestate among its headers when traced.
func tracedDelivery(n int, traced bool) webhook.Delivery {
	d := webhook.Delivery{DeliveryID: "0b7f9c7e-3c1e-4a53-9d51-2f8f3b6c1a10", EventType: "invoice.paid", Payload: []byte(tracePayload),
		Attempt: n, CreatedAt: time.Now().Add(-2 * time.Second), Headers: []byte(`{"X-Correlation-Id": "c-1"}`)}
	if traced {
		d.Headers = []byte(`{"traceparent": "00-` + producerTrace + `-` + producerSpan + `-01", "tracestate": "` + producerState +
			`", "X-Correlation-Id": "c-1"}`)
	}
	return d
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

// Each attempt is a client span named POST, a child of the producer's span
// (its traceparent among the event's headers), attributed by the HTTP
// client conventions and the webhook.* keys; the request carries the
// span's own traceparent instead of the producer's, and the producer's
// tracestate and other headers unchanged.
func TestAttemptSpanContinuesTheProducersTrace(t *testing.T) {
	t.Parallel()
	ts := newTraced(t, http.StatusOK)
	for n := 1; n <= 2; n++ {
		if res := ts.p.Send(t.Context(), tracedDelivery(n, true)); res.Class != webhook.Delivered {
			t.Fatalf("Send = %+v", res)
		}
	}
	spans := ts.rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	for i, s := range spans {
		sc, h := s.SpanContext(), ts.headers()[i]
		if s.Name() != "POST" || s.SpanKind() != trace.SpanKindClient || sc.TraceID().String() != producerTrace ||
			s.Parent().SpanID().String() != producerSpan || !s.Parent().IsRemote() {
			t.Errorf("attempt %d: span %q kind %v trace %s parent %s", i+1, s.Name(), s.SpanKind(), sc.TraceID(), s.Parent().SpanID())
		}
		want := "00-" + producerTrace + "-" + sc.SpanID().String() + "-01"
		if got := h.Values("Traceparent"); len(got) != 1 || got[0] != want {
			t.Errorf("attempt %d: the consumer saw traceparent %q, want %q (the attempt's span)", i+1, got, want)
		}
		if got := h.Values("Tracestate"); len(got) != 1 || got[0] != producerState {
			t.Errorf("attempt %d: tracestate %q, want the producer's %q", i+1, got, producerState)
		}
		if h.Get("X-Correlation-Id") != "c-1" {
			t.Errorf("attempt %d: the event's other headers changed: %v", i+1, h)
		}
		a := attrs(s)
		port := strings.TrimPrefix(ts.url, "http://127.0.0.1:")
		port = port[:strings.Index(port, "/")]
		for k, want := range map[attribute.Key]string{
			"http.request.method": "POST", "server.address": "127.0.0.1", "url.full": "http://127.0.0.1:" + port + "/hooks/in",
			"webhook.delivery_id": "0b7f9c7e-3c1e-4a53-9d51-2f8f3b6c1a10", "webhook.event_type": "invoice.paid",
			"webhook.endpoint": "default",
		} {
			if got := a[k].Emit(); got != want {
				t.Errorf("attempt %d: %s = %q, want %q", i+1, k, got, want)
			}
		}
		if a["server.port"].Emit() != port || a["webhook.attempt"].AsInt64() != int64(i+1) ||
			a["http.response.status_code"].AsInt64() != 200 || a["webhook.wait_ms"].AsInt64() < 2000 {
			t.Errorf("attempt %d: port %v attempt %v status %v wait_ms %v", i+1, a["server.port"].Emit(), a["webhook.attempt"].Emit(),
				a["http.response.status_code"].Emit(), a["webhook.wait_ms"].Emit())
		}
		if _, ok := a["error.type"]; ok || s.Status().Code != codes.Unset {
			t.Errorf("attempt %d delivered, yet error.type %v, status %v", i+1, a["error.type"].Emit(), s.Status())
		}
		noSecrets(t, s, h)
	}
}

// noSecrets fails the test when an attribute of s holds the secret, the
// payload, a signature the consumer received, or the URL's query.
func noSecrets(t *testing.T, s sdktrace.ReadOnlySpan, h http.Header) {
	t.Helper()
	forbidden := []string{traceSecret, "4111-payload-marker", "query-marker", "token="}
	for _, name := range []string{"X-Fluxora-Signature", "Webhook-Signature"} {
		for _, v := range strings.Fields(h.Get(name)) {
			forbidden = append(forbidden, strings.TrimPrefix(v, "v1,"))
		}
	}
	for _, kv := range s.Attributes() {
		for _, f := range forbidden {
			if f != "" && strings.Contains(kv.Value.Emit(), f) {
				t.Errorf("attribute %s = %q holds %q", kv.Key, kv.Value.Emit(), f)
			}
		}
	}
}

// Without a traceparent of the producer's, the attempt's span starts a
// trace, and the request carries its traceparent.
func TestAttemptSpanWithoutProducerTrace(t *testing.T) {
	t.Parallel()
	ts := newTraced(t, http.StatusOK)
	ts.p.Send(t.Context(), tracedDelivery(1, false))
	s := ts.rec.Ended()[0]
	if s.Parent().IsValid() {
		t.Fatalf("parent %v, want none", s.Parent())
	}
	want := "00-" + s.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"
	if got := ts.headers()[0].Values("Traceparent"); len(got) != 1 || got[0] != want {
		t.Fatalf("traceparent %q, want %q", got, want)
	}
}

// A failed attempt's span has the status Error, described by the
// attempt's class as it is recorded, and error.type the status code or
// the kind of failure.
func TestAttemptSpanOfAFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status    int
		class     string
		errorType string
	}{
		{http.StatusServiceUnavailable, "retryable", "503"},
		{http.StatusBadRequest, "permanent", "400"},
		{http.StatusFound, "permanent", "302"},
	} {
		ts := newTraced(t, tc.status)
		ts.p.Send(t.Context(), tracedDelivery(1, true))
		s := ts.rec.Ended()[0]
		a := attrs(s)
		if s.Status().Code != codes.Error || s.Status().Description != tc.class || a["error.type"].Emit() != tc.errorType ||
			a["http.response.status_code"].AsInt64() != int64(tc.status) {
			t.Errorf("%d: status %+v, error.type %q, http.response.status_code %v", tc.status, s.Status(), a["error.type"].Emit(),
				a["http.response.status_code"].Emit())
		}
	}
}

// Without an answer, error.type says what went wrong, and there is no
// status code.
func TestAttemptSpanWithoutAnswer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/"
	ln.Close()
	stop := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-stop }))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(stop) }) // first
	// The refused dial ends at once, but a loaded machine may take longer
	// than the hang's short timeout to say so: it gets a long one.
	for _, tc := range []struct {
		url, errorType string
		timeout        time.Duration
	}{
		{refused, "connection_refused", 10 * time.Second},
		{hang.URL, "timeout", 50 * time.Millisecond},
	} {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		env, err := sender.New(sender.Config{URL: tc.url, Secret: []byte(traceSecret), Timeout: tc.timeout})
		if err != nil {
			t.Fatal(err)
		}
		p, _ := sender.NewPerEndpoint(sender.PerEndpointConfig{Env: env, Tracer: tp.Tracer("test")})
		res := p.Send(t.Context(), tracedDelivery(1, true))
		p.Close()
		s := rec.Ended()[0]
		a := attrs(s)
		if _, ok := a["http.response.status_code"]; ok || a["error.type"].Emit() != tc.errorType || s.Status().Description != "retryable" {
			t.Errorf("%s (%s): error.type %q, status %+v, attributes %v", tc.errorType, res.Error, a["error.type"].Emit(), s.Status(), a)
		}
	}
}

// A delivery the sender does not attempt (its endpoint's secret does not
// open) makes no span; one it refuses before sending (bad headers) does,
// as the attempt is recorded.
func TestAttemptSpansOnlyForAttempts(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	p, err := sender.NewPerEndpoint(sender.PerEndpointConfig{Tracer: tp.Tracer("test"),
		OpenSecret: func(string, string) ([]byte, error) { return nil, errors.New("no key k1") }})
	if err != nil {
		t.Fatal(err)
	}
	d := tracedDelivery(1, false)
	d.EndpointID, d.EndpointName, d.URL, d.Secret = "e1", "ep", "http://127.0.0.1:9/", "sealed"
	if res := p.Send(t.Context(), d); res.Class != webhook.NotAttempted || len(rec.Ended()) != 0 {
		t.Fatalf("Send = %+v with %d spans, want NotAttempted and none", res, len(rec.Ended()))
	}
	p, _ = sender.NewPerEndpoint(sender.PerEndpointConfig{Tracer: tp.Tracer("test")})
	d.Headers = []byte(`{"X-Fluxora-Event": "forged"}`)
	res := p.Send(t.Context(), d)
	if res.Class != webhook.Permanent || len(rec.Ended()) != 1 {
		t.Fatalf("Send = %+v with %d spans, want Permanent and one", res, len(rec.Ended()))
	}
	s := rec.Ended()[0]
	if a := attrs(s); a["error.type"].Emit() != "invalid_request" || a["webhook.endpoint"].Emit() != "ep" || s.Status().Description != "permanent" {
		t.Fatalf("span %v, status %+v", a, s.Status())
	}
}

// Without a tracer the event's traceparent goes out exactly as written.
func TestNoTracerSendsTheProducersTraceparent(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }))
	t.Cleanup(srv.Close)
	env, err := sender.New(sender.Config{URL: srv.URL, Secret: []byte(traceSecret)})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := sender.NewPerEndpoint(sender.PerEndpointConfig{Env: env})
	t.Cleanup(p.Close)
	p.Send(t.Context(), tracedDelivery(1, true))
	h := <-got
	want := fmt.Sprintf("00-%s-%s-01", producerTrace, producerSpan)
	if tp := h.Values("Traceparent"); len(tp) != 1 || tp[0] != want || h.Get("Tracestate") != producerState {
		t.Fatalf("traceparent %q, tracestate %q; want the producer's", tp, h.Get("Tracestate"))
	}
}

// Without a tracer, PerEndpoint allocates nothing more per attempt than
// the sender itself: tracing off costs a nil check.
func TestNoTracerAllocatesNothingMore(t *testing.T) {
	env, err := sender.New(sender.Config{URL: "https://example.com/hook", Secret: []byte(traceSecret),
		Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Header: http.Header{}}, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := sender.NewPerEndpoint(sender.PerEndpointConfig{Env: env})
	d := tracedDelivery(1, false)
	d.Headers = nil
	req := sender.Request{DeliveryID: d.DeliveryID, EventType: d.EventType, Attempt: d.Attempt, Payload: d.Payload, Endpoint: "default"}
	ctx := context.Background()
	// A garbage collection empties sync.Pools and adds allocations to
	// whichever measurement it falls in (the suite runs packages in
	// parallel): the least of five runs of each, alternating.
	direct, per := math.Inf(1), math.Inf(1)
	for range 5 {
		direct = min(direct, testing.AllocsPerRun(200, func() { env.Send(ctx, req) }))
		per = min(per, testing.AllocsPerRun(200, func() { p.Send(ctx, d) }))
	}
	if raceDetector {
		// The race detector's instrumentation moves one more value of
		// PerEndpoint.Send to the heap than of the sender's (31 against
		// 30 under -race, equal without): allow that one.
		direct++
	}
	if per > direct {
		t.Fatalf("PerEndpoint.Send without a tracer allocates %v per attempt, the sender alone %v", per, direct)
	}
}
