package sender_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/fluxora/webhook-worker/sender"
	"github.com/fluxora/webhook-worker/webhook"
)

// BenchmarkSend measures a whole delivery over loopback. Its allocs/op
// include the httptest server's own.
func BenchmarkSend(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	s, err := sender.New(sender.Config{URL: srv.URL + "/hook", Secret: []byte(testSecret)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	req := testRequest()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res := s.Send(ctx, req); res.Outcome != sender.Delivered {
			b.Fatalf("Send = %+v", res)
		}
	}
}

// BenchmarkSendOverhead measures Send with an in-memory transport: what the
// sender and net/http.Client allocate per call, without any network.
func BenchmarkSendOverhead(b *testing.B) {
	s, err := sender.New(sender.Config{URL: "https://example.com/hook", Secret: []byte(testSecret),
		Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Header: http.Header{}}, nil
		})})
	if err != nil {
		b.Fatal(err)
	}
	req := testRequest()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res := s.Send(ctx, req); res.Outcome != sender.Delivered {
			b.Fatalf("Send = %+v", res)
		}
	}
}

// BenchmarkPerEndpointSend measures PerEndpoint.Send with an in-memory
// transport, without a tracer (tracing off) and with one that records
// every span (exporting nothing): what an attempt's span costs the sender.
func BenchmarkPerEndpointSend(b *testing.B) {
	env, err := sender.New(sender.Config{URL: "https://example.com/hook", Secret: []byte(testSecret),
		Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Header: http.Header{}}, nil
		})})
	if err != nil {
		b.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	d := tracedDelivery(1, true)
	for _, tc := range []struct {
		name   string
		tracer trace.Tracer
	}{{"off", nil}, {"on", tp.Tracer("bench")}} {
		b.Run(tc.name, func(b *testing.B) {
			p, err := sender.NewPerEndpoint(sender.PerEndpointConfig{Env: env, Tracer: tc.tracer})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if res := p.Send(b.Context(), d); res.Class != webhook.Delivered {
					b.Fatalf("Send = %+v", res)
				}
			}
		})
	}
}
