package verify_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/verify"
)

// The vector was computed outside Go:
// printf '1700000000.{"a":1}' | openssl dgst -sha256 -hmac whsec_test
const vector = "38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789"

func TestSignMatchesVector(t *testing.T) {
	t.Parallel()
	if got := verify.Sign([]byte("whsec_test"), 1700000000, []byte(`{"a":1}`)); got != vector {
		t.Fatalf("Sign = %s, want %s", got, vector)
	}
}

func request(ts int64, sig string, body []byte) *http.Request {
	r := httptest.NewRequest("POST", "/hook", bytes.NewReader(body))
	r.Header.Set("x-fluxora-delivery-id", "5b7a3a52-8a4e-4c0b-9a6f-2d6f0f0c1e11")
	r.Header.Set("x-fluxora-event", "stream.updated")
	r.Header.Set("x-fluxora-attempt", "2")
	r.Header.Set("x-fluxora-timestamp", strconv.FormatInt(ts, 10))
	r.Header.Set("x-fluxora-signature", sig)
	return r
}

func TestVerify(t *testing.T) {
	t.Parallel()
	now := time.Unix(1700000000, 0)
	v := &verify.Verifier{Secret: []byte("whsec_test"), Now: func() time.Time { return now }}
	body := []byte(`{"a":1}`)
	big := []byte(`"` + strings.Repeat("x", verify.MaxBody) + `"`)
	for _, tc := range []struct {
		name string
		ts   int64
		sig  string
		body []byte
		want error
	}{
		{"valid", 1700000000, vector, body, nil},
		{"valid at the tolerance edge", 1700000000 - 300, verify.Sign([]byte("whsec_test"), 1700000000-300, body), body, nil},
		{"stale", 1700000000 - 301, verify.Sign([]byte("whsec_test"), 1700000000-301, body), body, verify.ErrStale},
		{"future", 1700000000 + 301, verify.Sign([]byte("whsec_test"), 1700000000+301, body), body, verify.ErrStale},
		{"tampered body", 1700000000, vector, []byte(`{"a":2}`), verify.ErrBadSignature},
		{"wrong secret", 1700000000, verify.Sign([]byte("other"), 1700000000, body), body, verify.ErrBadSignature},
		{"uppercase hex", 1700000000, strings.ToUpper(vector), body, verify.ErrBadSignature},
		{"too large", 1700000000, verify.Sign([]byte("whsec_test"), 1700000000, big), big, verify.ErrBodyTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := v.Verify(request(tc.ts, tc.sig, tc.body))
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if err == nil && (ev.DeliveryID == "" || ev.Type != "stream.updated" || ev.Attempt != 2 || !bytes.Equal(ev.Body, tc.body)) {
				t.Fatalf("event %+v", ev)
			}
		})
	}
	r := request(1700000000, vector, body)
	r.Header.Del("x-fluxora-signature")
	if _, err := v.Verify(r); !errors.Is(err, verify.ErrMissingHeader) {
		t.Fatalf("missing header: %v", err)
	}
	r = request(1700000000, vector, body)
	r.Header.Set("x-fluxora-timestamp", "yesterday")
	if _, err := v.Verify(r); !errors.Is(err, verify.ErrBadTimestamp) {
		t.Fatalf("bad timestamp: %v", err)
	}
}
