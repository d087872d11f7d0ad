package main

import (
	"bytes"
	"compress/flate"
	"testing"
)

// The padding is what -payload-bytes says, the same every time, and
// compresses about as poorly as real values do (PostgreSQL compresses a
// large jsonb value before storing it).
func TestPadding(t *testing.T) {
	if padding(0) != "" || padding(-1) != "" {
		t.Fatal("no padding asked, some given")
	}
	p := padding(2000)
	if len(p) != 2000 || p != padding(2000) {
		t.Fatalf("padding(2000): %d bytes, or not the same twice", len(p))
	}
	var b bytes.Buffer
	w, _ := flate.NewWriter(&b, flate.BestCompression)
	w.Write([]byte(p))
	w.Close()
	if b.Len() < 1400 {
		t.Fatalf("2000 bytes of padding compress to %d: too regular for a real payload", b.Len())
	}
}
