package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/verify"
)

func TestHandlerVerifiesAndDeduplicates(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	h := &handler{v: &verify.Verifier{Secret: []byte("s")}, seen: map[string]bool{}, out: &out}
	send := func(sig string) int {
		body := []byte(`{"a":1}`)
		ts := time.Now().Unix()
		r := httptest.NewRequest("POST", "/hooks", bytes.NewReader(body))
		r.Header.Set("x-fluxora-delivery-id", "5b7a3a52-8a4e-4c0b-9a6f-2d6f0f0c1e11")
		r.Header.Set("x-fluxora-event", "e")
		r.Header.Set("x-fluxora-attempt", "1")
		r.Header.Set("x-fluxora-timestamp", strconv.FormatInt(ts, 10))
		if sig == "" {
			sig = verify.Sign([]byte("s"), ts, body)
		}
		r.Header.Set("x-fluxora-signature", sig)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	if a, b := send(""), send(""); a != http.StatusNoContent || b != http.StatusNoContent {
		t.Fatalf("statuses %d %d", a, b)
	}
	if code := send(strings.Repeat("0", 64)); code != http.StatusUnauthorized {
		t.Fatalf("bad signature: %d", code)
	}
	s := out.String()
	if strings.Count(s, "verified ") != 1 || strings.Count(s, "duplicate ") != 1 || strings.Count(s, "rejected") != 1 {
		t.Fatalf("output:\n%s", s)
	}
}

func TestDelay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body string
		want time.Duration
	}{
		{`{"a":1}`, 0},
		{`{"delay_ms":250}`, 250 * time.Millisecond},
		{`{"delay_ms":-5}`, 0},
		{`{"delay_ms":600000}`, maxDelay},
		{`not json`, 0},
	} {
		if got := delay([]byte(tc.body)); got != tc.want {
			t.Errorf("delay(%s) = %v, want %v", tc.body, got, tc.want)
		}
	}
}
