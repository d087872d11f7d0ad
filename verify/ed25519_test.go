package verify_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/sender"
	"github.com/fluxora/webhook-worker/signingkey"
	"github.com/fluxora/webhook-worker/verify"
)

// signed is a request the worker's sender made, as its consumer received
// it.
type signed struct {
	header http.Header
	body   []byte
}

// sent sends one delivery with cfg at the time at (the sender's clock) to
// a loopback consumer and returns what it received.
func sent(t *testing.T, cfg sender.Config, at time.Time) signed {
	t.Helper()
	got := make(chan signed, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- signed{r.Header.Clone(), b}
	}))
	defer srv.Close()
	cfg.URL, cfg.Now = srv.URL, func() time.Time { return at }
	s, err := sender.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res := s.Send(t.Context(), sender.Request{DeliveryID: "7c1f2e0a-3b4d-4e5f-8a9b-0c1d2e3f4a5b", EventType: "invoice.paid", Attempt: 1,
		Payload: []byte(`{"amount": 10}`)})
	if res.Outcome != sender.Delivered {
		t.Fatalf("%+v", res)
	}
	return <-got
}

// req makes s a request again, its body changed by change when not nil.
func (s signed) req(change func([]byte) []byte) *http.Request {
	body := append([]byte(nil), s.body...)
	if change != nil {
		body = change(body)
	}
	r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
	r.Header = s.header.Clone()
	return r
}

func keyPair(t *testing.T) (private, public string) {
	t.Helper()
	private, err := signingkey.Generate(signingkey.Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	return private, signingkey.Public([]byte(private))
}

// A Verifier given an endpoint's public key accepts what the worker signs
// with the private key, and refuses another key's signature, a changed
// body, a stale timestamp and a public key that does not read.
func TestPublicKeyVerifier(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	priv, pub := keyPair(t)
	_, otherPub := keyPair(t)
	clock := func() time.Time { return now }
	fresh := sent(t, sender.Config{Secret: []byte(priv)}, now.Add(-time.Minute))
	stale := sent(t, sender.Config{Secret: []byte(priv)}, now.Add(-6*time.Minute))
	for _, tc := range []struct {
		name string
		v    verify.Verifier
		r    *http.Request
		want error
	}{
		{"its public key", verify.Verifier{Secret: []byte(pub), Now: clock}, fresh.req(nil), nil},
		{"another key", verify.Verifier{Secret: []byte(otherPub), Now: clock}, fresh.req(nil), verify.ErrBadSignature},
		{"a changed body", verify.Verifier{Secret: []byte(pub), Now: clock},
			fresh.req(func(b []byte) []byte { return bytes.Replace(b, []byte("10"), []byte("99"), 1) }), verify.ErrBadSignature},
		{"a timestamp past the tolerance", verify.Verifier{Secret: []byte(pub), Now: clock}, stale.req(nil), verify.ErrStale},
		{"a whpk_ key that is not one", verify.Verifier{Secret: []byte(pub[:20]), Now: clock}, fresh.req(nil), verify.ErrBadKey},
		{"the private key's base64 as a secret", verify.Verifier{Secret: []byte(priv), Now: clock}, fresh.req(nil), verify.ErrBadSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev, err := tc.v.Verify(tc.r)
			if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
			if err == nil && (ev.DeliveryID != "7c1f2e0a-3b4d-4e5f-8a9b-0c1d2e3f4a5b" || ev.Type != "invoice.paid" || string(ev.Body) != `{"amount": 10}` ||
				!ev.Timestamp.Equal(now.Add(-time.Minute))) {
				t.Fatalf("event %+v", ev)
			}
		})
	}
	if fresh.header.Get("x-fluxora-signature") != "" {
		t.Fatal("an ed25519 endpoint's request carries x-fluxora-signature")
	}
}

// Whoever holds the public key cannot sign with it: an HMAC keyed with
// the whpk_ text, in either header, is refused, and so is a "v1a," entry
// copied from another delivery.
func TestPublicKeyIsNoSecret(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	priv, pub := keyPair(t)
	v := verify.Verifier{Secret: []byte(pub), Now: func() time.Time { return now }}
	genuine := sent(t, sender.Config{Secret: []byte(priv)}, now)
	ts := strconv.FormatInt(now.Unix(), 10)
	forged := genuine.req(func(b []byte) []byte { return []byte(`{"amount": 1000000}`) })
	mac := hmac.New(sha256.New, []byte(pub))
	mac.Write([]byte(ts + "."))
	mac.Write([]byte(`{"amount": 1000000}`))
	forged.Header.Set("x-fluxora-signature", verify.Sign([]byte(pub), now.Unix(), []byte(`{"amount": 1000000}`)))
	forged.Header.Set("webhook-signature", verify.SignStandard([]byte(pub), genuine.header.Get("webhook-id"), now.Unix(), []byte(`{"amount": 1000000}`))+
		" "+genuine.header.Get("webhook-signature")+" v1a,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	if _, err := v.Verify(forged); !errors.Is(err, verify.ErrBadSignature) {
		t.Fatalf("a request forged with the public key: %v, want ErrBadSignature", err)
	}
	if _, err := v.CheckStandard(genuine.header.Get("webhook-id"), ts, "v1a,"+base64.StdEncoding.EncodeToString(make([]byte, ed25519.SignatureSize)),
		genuine.body); !errors.Is(err, verify.ErrBadSignature) {
		t.Fatalf("a zero signature: %v", err)
	}
}

// A rotation, between key pairs or from a shared secret to a key pair:
// during the grace both sign webhook-signature, and a consumer holding
// either accepts the request; one holding both accepts the old one's
// alone until the end it was told, and refuses it after with
// ErrPreviousExpired.
func TestPublicKeyRotation(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	newPriv, newPub := keyPair(t)
	oldPriv, oldPub := keyPair(t)
	const oldSecret = "whsec_c2VjcmV0LWJlZm9yZS10aGUtcm90YXRpb24="
	for _, tc := range []struct {
		name           string
		oldSigns       string // what signed before: a private key or a secret
		oldVerifies    string // what the consumer held before
		newPub, newKey string
	}{
		{"key pair to key pair", oldPriv, oldPub, newPub, newPriv},
		{"shared secret to key pair", oldSecret, oldSecret, newPub, newPriv},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			during := sent(t, sender.Config{Secret: []byte(tc.newKey), PreviousSecret: []byte(tc.oldSigns), PreviousUntil: now.Add(time.Hour)}, now)
			if n := len(bytes.Fields([]byte(during.header.Get("webhook-signature")))); n != 2 {
				t.Fatalf("%d signatures during the grace, want 2", n)
			}
			for name, v := range map[string]verify.Verifier{
				"the new key alone": {Secret: []byte(tc.newPub), Now: clock},
				"the old one alone": {Secret: []byte(tc.oldVerifies), Now: clock},
				"both":              {Secret: []byte(tc.newPub), Previous: []byte(tc.oldVerifies), PreviousUntil: now.Add(time.Hour), Now: clock},
			} {
				if _, err := v.Verify(during.req(nil)); err != nil {
					t.Fatalf("during the grace, %s: %v", name, err)
				}
			}
			oldOnly := sent(t, sender.Config{Secret: []byte(tc.oldSigns)}, now)
			for until, want := range map[time.Time]error{now.Add(time.Minute): nil, now.Add(-time.Second): verify.ErrPreviousExpired} {
				v := verify.Verifier{Secret: []byte(tc.newPub), Previous: []byte(tc.oldVerifies), PreviousUntil: until, Now: clock}
				if _, err := v.Verify(oldOnly.req(nil)); !errors.Is(err, want) || (err == nil) != (want == nil) {
					t.Fatalf("signed by the old one alone, grace until %s: %v, want %v", until.Sub(now), err, want)
				}
			}
		})
	}
}
