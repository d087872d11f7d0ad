package sender

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/fluxora/webhook-worker/eventheaders"
	"github.com/fluxora/webhook-worker/webhook"
)

// The attributes of an attempt's span besides the HTTP client's semantic
// conventions (Send).
const (
	// AttrDeliveryID is the delivery's id (x-fluxora-delivery-id).
	AttrDeliveryID = attribute.Key("webhook.delivery_id")
	// AttrEventType is the event's type (x-fluxora-event).
	AttrEventType = attribute.Key("webhook.event_type")
	// AttrEndpoint is the endpoint's name (x-fluxora-endpoint).
	AttrEndpoint = attribute.Key("webhook.endpoint")
	// AttrAttempt is the attempt's number, 1 for the first.
	AttrAttempt = attribute.Key("webhook.attempt")
	// AttrWaitMS is how long the row waited, in milliseconds, from the
	// time it was due (its created_at: its insert, or its retry's due
	// time) to the attempt's start; 0 when the clocks disagree.
	AttrWaitMS = attribute.Key("webhook.wait_ms")
)

// traceContext reads and writes W3C traceparent and tracestate.
var traceContext propagation.TraceContext

// startSpan starts the span of one attempt of d, sent by s (nil when the
// endpoint cannot be sent to) as req, and returns it with the traceparent
// the request carries for it. Its parent is the traceparent among the
// event's headers, when they carry a valid one: the producer's trace goes
// on across the queue, the retries and the workers. Its name is the
// method ("POST"), its kind client, its attributes those of the HTTP
// client's semantic conventions (http.request.method, server.address,
// server.port, url.full without credentials, query or fragment) and the
// webhook.* ones: nothing of the payload, the secret, the signature or
// the URL's query.
func (p *PerEndpoint) startSpan(ctx context.Context, d webhook.Delivery, s *Sender, req Request) (trace.Span, string) {
	if len(req.Headers) > 0 {
		ctx = traceContext.Extract(ctx, fieldsCarrier(req.Headers))
	}
	now := time.Now()
	attrs := make([]attribute.KeyValue, 0, 9)
	attrs = append(attrs, semconv.HTTPRequestMethodPost)
	if s != nil {
		attrs = append(attrs, s.target...)
	}
	attrs = append(attrs, AttrDeliveryID.String(d.DeliveryID), AttrEventType.String(d.EventType),
		AttrEndpoint.String(req.Endpoint), AttrAttempt.Int(d.Attempt), AttrWaitMS.Int64(max(now.Sub(d.CreatedAt), 0).Milliseconds()))
	ctx, span := p.tracer.Start(ctx, "POST", trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(now),
		trace.WithAttributes(attrs...))
	var out traceparentCarrier
	traceContext.Inject(ctx, &out)
	return span, string(out)
}

// endSpan ends an attempt's span with its answer: the status code, and on
// a failure error.type (the status code, or a short kind of network error)
// and the status Error described by the class ("retryable" or
// "permanent", as the attempt is recorded).
func endSpan(span trace.Span, res Result) {
	if res.Status != 0 {
		span.SetAttributes(semconv.HTTPResponseStatusCode(res.Status))
	}
	if res.Outcome != Delivered {
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(res)))
		span.SetStatus(codes.Error, res.Outcome.String())
	}
	span.End()
}

// errorType is the error.type of a failed attempt: the status code when
// the consumer answered, else one of a few kinds told from the texts
// this package writes (errorText, checkRequest), "_OTHER" for the rest.
func errorType(res Result) string {
	if res.Status != 0 {
		return strconv.Itoa(res.Status)
	}
	e := res.Error
	switch {
	case strings.HasPrefix(e, "timeout after "):
		return "timeout"
	case strings.HasPrefix(e, "read response: "):
		return "read_response"
	case strings.HasPrefix(e, "response headers exceeded "):
		return "response_headers_too_large"
	case strings.HasPrefix(e, "invalid "):
		return "invalid_request"
	case e == context.Canceled.Error() || e == context.DeadlineExceeded.Error():
		return "canceled"
	case strings.Contains(e, "egress guard"):
		return "egress_refused"
	case strings.Contains(e, "tls: ") || strings.Contains(e, "x509: ") || strings.Contains(e, "TLS handshake"):
		return "tls"
	case strings.Contains(e, "connection refused"):
		return "connection_refused"
	}
	return semconv.ErrorTypeOther.Value.AsString()
}

// spanTarget is the URL's part of an attempt's span: url.full without
// credentials, query or fragment, server.address and server.port (the
// scheme's when the URL has none).
func spanTarget(u *url.URL) []attribute.KeyValue {
	full := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		port = map[string]int{"http": 80, "https": 443}[u.Scheme]
	}
	return []attribute.KeyValue{semconv.ServerAddress(u.Hostname()), semconv.ServerPort(port), semconv.URLFull(full.String())}
}

// fieldsCarrier reads an event's headers for the propagator, names
// case-insensitively.
type fieldsCarrier []eventheaders.Field

func (c fieldsCarrier) Get(key string) string {
	for _, f := range c {
		if strings.EqualFold(f.Name, key) {
			return f.Value
		}
	}
	return ""
}

func (c fieldsCarrier) Set(string, string) {}

func (c fieldsCarrier) Keys() []string {
	keys := make([]string, len(c))
	for i, f := range c {
		keys[i] = f.Name
	}
	return keys
}

// traceparentCarrier keeps the traceparent the propagator writes; the
// tracestate it would write is the event's own, sent as it is among its
// headers.
type traceparentCarrier string

func (c *traceparentCarrier) Get(string) string { return "" }

func (c *traceparentCarrier) Set(key, value string) {
	if key == "traceparent" {
		*c = traceparentCarrier(value)
	}
}

func (c *traceparentCarrier) Keys() []string { return nil }
