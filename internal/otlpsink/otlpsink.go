// Package otlpsink is a real OTLP trace receiver for tests, on loopback:
// OTLP/HTTP (protobuf, POST /v1/traces, on httptest) and OTLP/gRPC (the
// collector's TraceService on a grpc server). It decodes every export with
// the OTLP protobuf types and keeps the spans, flattened, for the test to
// look at. Hold makes it stop answering, as a stalled collector does.
package otlpsink

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// Span is one received span, its ids in hex and its attributes' values as
// Go values (string, int64, float64, bool; others as their text).
type Span struct {
	TraceID, SpanID, ParentSpanID string
	TraceState                    string
	Name                          string
	Kind                          tracepb.Span_SpanKind
	Attrs                         map[string]any
	StatusCode                    tracepb.Status_StatusCode
	StatusMessage                 string
	// Resource holds the attributes of the span's resource; Scope is its
	// instrumentation scope's name.
	Resource map[string]any
	Scope    string
}

// Sink keeps the spans it received.
type Sink struct {
	mu      sync.Mutex
	spans   []Span
	exports int
	held    chan struct{} // closed: answer; open: hold every export
	// Endpoint is the receiver's URL: http://127.0.0.1:PORT (add
	// /v1/traces for OTLP/HTTP's traces resource).
	Endpoint string
}

func newSink() *Sink {
	s := &Sink{held: make(chan struct{})}
	close(s.held)
	return s
}

// NewHTTP starts an OTLP/HTTP receiver on 127.0.0.1, closed at the test's
// end.
func NewHTTP(t testing.TB) *Sink {
	t.Helper()
	s := newSink()
	srv := httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	t.Cleanup(func() {
		s.Release()
		srv.Close()
	})
	s.Endpoint = srv.URL
	return s
}

func (s *Sink) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	req := &coltracepb.ExportTraceServiceRequest{}
	if err == nil {
		err = proto.Unmarshal(b, req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !s.wait(r.Context()) {
		return
	}
	s.add(req)
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = io.Copy(w, bytes.NewReader(out))
}

// NewGRPC starts an OTLP/gRPC receiver on 127.0.0.1, stopped at the
// test's end.
func NewGRPC(t testing.TB) *Sink {
	t.Helper()
	s := newSink()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, grpcService{s: s})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		s.Release()
		srv.Stop()
	})
	s.Endpoint = "http://" + ln.Addr().String()
	return s
}

type grpcService struct {
	coltracepb.UnimplementedTraceServiceServer
	s *Sink
}

func (g grpcService) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	if !g.s.wait(ctx) {
		return nil, ctx.Err()
	}
	g.s.add(req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// Hold makes every export wait, unanswered, until Release or the
// exporter gives up: a stalled collector.
func (s *Sink) Hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.held:
		s.held = make(chan struct{})
	default:
	}
}

// Release answers the exports held and those to come.
func (s *Sink) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.held:
	default:
		close(s.held)
	}
}

func (s *Sink) wait(ctx context.Context) bool {
	s.mu.Lock()
	held := s.held
	s.mu.Unlock()
	select {
	case <-held:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *Sink) add(req *coltracepb.ExportTraceServiceRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.exports++
	for _, rs := range req.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s.spans = append(s.spans, Span{
					TraceID: hex.EncodeToString(sp.GetTraceId()), SpanID: hex.EncodeToString(sp.GetSpanId()),
					ParentSpanID: hex.EncodeToString(sp.GetParentSpanId()), TraceState: sp.GetTraceState(),
					Name: sp.GetName(), Kind: sp.GetKind(), Attrs: attrs(sp.GetAttributes()),
					StatusCode: sp.GetStatus().GetCode(), StatusMessage: sp.GetStatus().GetMessage(),
					Resource: res, Scope: ss.GetScope().GetName(),
				})
			}
		}
	}
}

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	out := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.GetKey()] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = x.IntValue
		case *commonpb.AnyValue_DoubleValue:
			out[kv.GetKey()] = x.DoubleValue
		case *commonpb.AnyValue_BoolValue:
			out[kv.GetKey()] = x.BoolValue
		default:
			out[kv.GetKey()] = v.String()
		}
	}
	return out
}

// Spans returns the spans received so far.
func (s *Sink) Spans() []Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Span(nil), s.spans...)
}

// Exports is how many export requests were answered.
func (s *Sink) Exports() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exports
}

// WaitSpans waits until at least n spans arrived, failing the test after
// timeout, and returns them.
func (s *Sink) WaitSpans(t testing.TB, n int, timeout time.Duration) []Span {
	t.Helper()
	waitfor.True(t, timeout, "spans received", func() bool { return len(s.Spans()) >= n })
	return s.Spans()
}
