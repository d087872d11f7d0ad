package sender_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/fluxora/webhook-worker/sender"
)

// A whsec_ secret's rest is base64 with or without its '=' padding, as the
// npm standardwebhooks and svix libraries decode it: either way the decoded
// bytes are the Standard Webhooks key, and the official Go library verifies
// the request. That library (v1.3.0) decodes padded base64 only, so for an
// unpadded secret it is given the padded form of the same key.
// x-fluxora-signature stays keyed with the whole secret string.
func TestStandardKeyPaddedOrNot(t *testing.T) {
	t.Parallel()
	for _, key := range [][]byte{
		bytes.Repeat([]byte{0xfb}, 32),                  // one '=' of padding
		[]byte("thirty-one bytes of key material"[:31]), // two
		bytes.Repeat([]byte{7}, 30),                     // none: both forms are the same
	} {
		padded := "whsec_" + base64.StdEncoding.EncodeToString(key)
		for form, secret := range map[string]string{"padded": padded, "unpadded": "whsec_" + base64.RawStdEncoding.EncodeToString(key)} {
			t.Run(fmt.Sprintf("%d-byte key, %s", len(key), form), func(t *testing.T) {
				t.Parallel()
				if got := sender.StandardKey([]byte(secret)); !bytes.Equal(got, key) {
					t.Fatalf("StandardKey = %x, want %x", got, key)
				}
				r, body := sendOne(t, secret)
				wh, err := standardwebhooks.NewWebhook(secret)
				if err != nil && !strings.HasSuffix(padded, "=") {
					t.Fatalf("the official library refuses %q: %v", secret, err)
				}
				if err != nil { // unpadded: the library only decodes padded base64
					wh, err = standardwebhooks.NewWebhook(padded)
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := wh.Verify(body, r.Header); err != nil {
					t.Fatalf("the official library refuses the request: %v", err)
				}
				ts, _ := strconv.ParseInt(r.Header.Get("X-Fluxora-Timestamp"), 10, 64)
				if got, want := r.Header.Get("X-Fluxora-Signature"), sender.Sign([]byte(secret), ts, body); got != want {
					t.Fatalf("x-fluxora-signature %s, want %s (keyed with the whole secret)", got, want)
				}
			})
		}
	}
	// Not base64 at all after whsec_: the whole secret's bytes are the key.
	for _, secret := range []string{"whsec_harness_secret_value", "whsec_", "whsec_=", "whsec_ab=c"} {
		if got := sender.StandardKey([]byte(secret)); string(got) != secret {
			t.Errorf("StandardKey(%q) = %q, want the secret's own bytes", secret, got)
		}
	}
}

// sendOne sends testRequest, signed with secret, to a loopback consumer and
// returns what it received.
func sendOne(t *testing.T, secret string) (*http.Request, []byte) {
	t.Helper()
	got := make(chan *http.Request, 1)
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ = io.ReadAll(r.Body)
		got <- r
	}))
	defer srv.Close()
	s, err := sender.New(sender.Config{URL: srv.URL, Secret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if res := s.Send(t.Context(), testRequest()); res.Outcome != sender.Delivered {
		t.Fatalf("%+v", res)
	}
	return <-got, body
}
