package main

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// otlpSink is the worker-tuned-traced system's collector: an OTLP/HTTP
// receiver on 127.0.0.1 that accepts every export (POST /v1/traces,
// protobuf), counts its spans and discards them. It counts by walking the
// protobuf's wire format (request → resource_spans → scope_spans →
// spans) rather than decoding it into messages, so that the bench process,
// which also runs the consumer, spends as little as it can on it.
type otlpSink struct {
	srv     *http.Server
	url     string
	spans   atomic.Int64
	exports atomic.Int64
	bad     atomic.Int64 // exports that did not parse
	bufs    sync.Pool
}

func newOTLPSink() (*otlpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &otlpSink{url: "http://" + ln.Addr().String()}
	s.bufs.New = func() any { return new(bytes.Buffer) }
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *otlpSink) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	buf := s.bufs.Get().(*bytes.Buffer)
	defer s.bufs.Put(buf)
	buf.Reset()
	if _, err := io.Copy(buf, r.Body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	n, err := countSpans(buf.Bytes())
	if err != nil {
		s.bad.Add(1)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.spans.Add(n)
	s.exports.Add(1)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK) // an empty ExportTraceServiceResponse
}

// The field numbers walked: ExportTraceServiceRequest.resource_spans,
// ResourceSpans.scope_spans, ScopeSpans.spans.
const (
	fieldResourceSpans = 1
	fieldScopeSpans    = 2
	fieldSpans         = 2
)

var errBadExport = errors.New("not an OTLP ExportTraceServiceRequest")

// countSpans counts the spans of an ExportTraceServiceRequest.
func countSpans(req []byte) (int64, error) {
	var n int64
	err := eachField(req, fieldResourceSpans, func(rs []byte) error {
		return eachField(rs, fieldScopeSpans, func(ss []byte) error {
			return eachField(ss, fieldSpans, func([]byte) error { n++; return nil })
		})
	})
	return n, err
}

// eachField calls f with the bytes of every length-delimited field num of
// msg, skipping the others.
func eachField(msg []byte, num protowire.Number, f func([]byte) error) error {
	for len(msg) > 0 {
		fn, typ, l := protowire.ConsumeTag(msg)
		if l < 0 {
			return errBadExport
		}
		msg = msg[l:]
		if fn == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(msg)
			if l < 0 {
				return errBadExport
			}
			if err := f(v); err != nil {
				return err
			}
			msg = msg[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(fn, typ, msg)
		if l < 0 {
			return errBadExport
		}
		msg = msg[l:]
	}
	return nil
}

func (s *otlpSink) Close() { _ = s.srv.Close() }
