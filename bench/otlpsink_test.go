package main

import (
	"bytes"
	"net/http"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// message is a protobuf message of the given fields: each a length-delimited
// field (num, bytes) or a varint (num, nil).
func message(fields ...any) []byte {
	var b []byte
	for i := 0; i < len(fields); i += 2 {
		num := protowire.Number(fields[i].(int))
		if v, ok := fields[i+1].([]byte); ok {
			b = protowire.AppendTag(b, num, protowire.BytesType)
			b = protowire.AppendBytes(b, v)
			continue
		}
		b = protowire.AppendTag(b, num, protowire.VarintType)
		b = protowire.AppendVarint(b, 7)
	}
	return b
}

// The sink counts the spans of every scope of every resource, skipping the
// other fields, and refuses what is not protobuf.
func TestOTLPSinkCountsSpans(t *testing.T) {
	span := message(1, []byte("0123456789abcdef"), 5, []byte("POST"), 6, nil)
	scope := message(1, message(1, []byte("github.com/fluxora/webhook-worker")), 2, span, 2, span, 3, []byte("schema"))
	resource := message(1, message(1, []byte("attrs")), 2, scope, 2, message(2, span))
	req := message(1, resource, 1, message(2, message(2, span)))
	if n, err := countSpans(req); n != 4 || err != nil {
		t.Fatalf("countSpans = %d, %v; want 4", n, err)
	}
	if _, err := countSpans([]byte{0xff, 0xff}); err == nil {
		t.Fatal("garbage counted")
	}

	s, err := newOTLPSink()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Post(s.url+"/v1/traces", "application/x-protobuf", bytes.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || s.spans.Load() != 4 || s.exports.Load() != 1 {
		t.Fatalf("status %d, spans %d, exports %d", resp.StatusCode, s.spans.Load(), s.exports.Load())
	}
}
