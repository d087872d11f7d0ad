package sender_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/fluxora/webhook-worker/sender"
)

// During a rotation's grace period webhook-signature carries two
// signatures, the new secret's first, and the official library accepts the
// request with either secret; x-fluxora-signature is the new secret's
// alone. Once the grace period is over only the new secret signs.
func TestPreviousSecretSignsDuringGrace(t *testing.T) {
	t.Parallel()
	const newSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	const oldSecret = "an old raw secret"
	for _, tc := range []struct {
		name  string
		until time.Time
		both  bool
	}{
		{"in the grace period", time.Now().Add(time.Hour), true},
		{"after it", time.Now().Add(-time.Second), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			type got struct {
				h    http.Header
				body []byte
			}
			reqs := make(chan got, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				reqs <- got{r.Header, b}
			}))
			defer srv.Close()
			s, err := sender.New(sender.Config{URL: srv.URL, Secret: []byte(newSecret),
				PreviousSecret: []byte(oldSecret), PreviousUntil: tc.until})
			if err != nil {
				t.Fatal(err)
			}
			req := testRequest()
			if res := s.Send(t.Context(), req); res.Outcome != sender.Delivered {
				t.Fatalf("%+v", res)
			}
			g := <-reqs
			ts := mustInt(t, g.h.Get("Webhook-Timestamp"))
			newKey, oldKey := sender.StandardKey([]byte(newSecret)), sender.StandardKey([]byte(oldSecret))
			want := sender.SignStandard(newKey, req.DeliveryID, ts, req.Payload)
			if tc.both {
				want += " " + sender.SignStandard(oldKey, req.DeliveryID, ts, req.Payload)
			}
			if sig := g.h.Get("Webhook-Signature"); sig != want {
				t.Fatalf("webhook-signature %q, want %q", sig, want)
			}
			if sig := g.h.Get("X-Fluxora-Signature"); sig != sender.Sign([]byte(newSecret), ts, req.Payload) {
				t.Fatalf("x-fluxora-signature %q is not the new secret's", sig)
			}
			newWH, err := standardwebhooks.NewWebhook(newSecret)
			if err != nil {
				t.Fatal(err)
			}
			oldWH, err := standardwebhooks.NewWebhookRaw([]byte(oldSecret))
			if err != nil {
				t.Fatal(err)
			}
			if err := newWH.Verify(g.body, g.h); err != nil {
				t.Fatalf("the official library refuses the new secret's signature: %v", err)
			}
			err = oldWH.Verify(g.body, g.h)
			if tc.both && err != nil {
				t.Fatalf("the official library refuses the previous secret during its grace: %v", err)
			}
			if !tc.both && err == nil {
				t.Fatal("the previous secret still verifies after its grace period")
			}
		})
	}
}

func TestPreviousSecretNeedsItsEnd(t *testing.T) {
	t.Parallel()
	_, err := sender.New(sender.Config{URL: "http://127.0.0.1:1/", Secret: []byte("s"), PreviousSecret: []byte("zq-old-secret-zq")})
	if err == nil || !strings.Contains(err.Error(), "PreviousUntil") {
		t.Fatalf("err = %v, want one naming PreviousUntil", err)
	}
	if err != nil && strings.Contains(err.Error(), "zq-old-secret-zq") {
		t.Fatalf("the error quotes the secret: %v", err)
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}
