package verify_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/verify"
)

// Verify reads the ordering key and sequence (Standard Webhooks names
// first, the x-fluxora-* twins otherwise); an event without them has none.
func TestVerifyOrderingHeaders(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	v := verify.Verifier{Secret: []byte(newSecret), Now: func() time.Time { return at }}
	body := []byte(`{"id":42}`)
	for _, tc := range []struct {
		name    string
		headers map[string]string
		key     string
		seq     int64
	}{
		{"none", nil, "", 0},
		{"standard names", map[string]string{"webhook-ordering-key": "order-42", "webhook-sequence": "7"}, "order-42", 7},
		{"fluxora names", map[string]string{"x-fluxora-ordering-key": "order-42", "x-fluxora-sequence": "8"}, "order-42", 8},
	} {
		r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
		r.Header.Set("x-fluxora-delivery-id", "d-1")
		r.Header.Set("x-fluxora-event", "order.paid")
		r.Header.Set("x-fluxora-timestamp", strconv.FormatInt(at.Unix(), 10))
		r.Header.Set("x-fluxora-signature", verify.Sign([]byte(newSecret), at.Unix(), body))
		for k, val := range tc.headers {
			r.Header.Set(k, val)
		}
		ev, err := v.Verify(r)
		if err != nil || ev.OrderingKey != tc.key || ev.Sequence != tc.seq {
			t.Errorf("%s: key %q sequence %d, %v; want %q %d", tc.name, ev.OrderingKey, ev.Sequence, err, tc.key, tc.seq)
		}
	}
}
