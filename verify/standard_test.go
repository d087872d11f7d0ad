package verify_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/fluxora/webhook-worker/verify"
)

const (
	newSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	oldSecret = "whsec_c2VjcmV0LWJlZm9yZS10aGUtcm90YXRpb24="
)

// standardRequest is signed with the Standard Webhooks headers only, by the
// official library, with each of secrets (space-separated, as during a
// rotation).
func standardRequest(t *testing.T, at time.Time, body []byte, secrets ...string) *http.Request {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
	var sigs []byte
	for _, s := range secrets {
		wh, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := wh.Sign("msg-1", at, body)
		if err != nil {
			t.Fatal(err)
		}
		if len(sigs) > 0 {
			sigs = append(sigs, ' ')
		}
		sigs = append(sigs, sig...)
	}
	r.Header.Set("webhook-id", "msg-1")
	r.Header.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	r.Header.Set("webhook-signature", string(sigs))
	r.Header.Set("x-fluxora-event", "invoice.paid")
	r.Header.Set("x-fluxora-attempt", "2")
	return r
}

// The kit verifies Standard Webhooks headers as the official library signs
// them, accepts a previous secret inside its grace period and refuses it,
// with a distinct error, after it.
func TestStandardHeadersAndPreviousSecret(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"amount":10}`)
	clock := func() time.Time { return now }
	for _, tc := range []struct {
		name     string
		v        verify.Verifier
		signedBy []string
		want     error
	}{
		{"current secret", verify.Verifier{Secret: []byte(newSecret), Now: clock}, []string{newSecret}, nil},
		{"rotation in progress: both signatures, consumer still on the old one",
			verify.Verifier{Secret: []byte(oldSecret), Now: clock}, []string{newSecret, oldSecret}, nil},
		{"previous secret inside its grace period",
			verify.Verifier{Secret: []byte(newSecret), Previous: []byte(oldSecret), PreviousUntil: now.Add(time.Hour), Now: clock},
			[]string{oldSecret}, nil},
		{"previous secret after its grace period",
			verify.Verifier{Secret: []byte(newSecret), Previous: []byte(oldSecret), PreviousUntil: now.Add(-time.Second), Now: clock},
			[]string{oldSecret}, verify.ErrPreviousExpired},
		{"unknown secret", verify.Verifier{Secret: []byte(newSecret), Now: clock}, []string{oldSecret}, verify.ErrBadSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev, err := tc.v.Verify(standardRequest(t, now, body, tc.signedBy...))
			if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
			if err == nil && (ev.DeliveryID != "msg-1" || ev.Type != "invoice.paid" || ev.Attempt != 2 || string(ev.Body) != string(body)) {
				t.Fatalf("event %+v", ev)
			}
		})
	}
	// The x-fluxora signature follows the same rules for the previous secret.
	v := verify.Verifier{Secret: []byte(newSecret), Previous: []byte(oldSecret), PreviousUntil: now.Add(time.Hour), Now: clock}
	sig := verify.Sign([]byte(oldSecret), now.Unix(), body)
	if _, err := v.Check(strconv.FormatInt(now.Unix(), 10), sig, body); err != nil {
		t.Fatalf("x-fluxora signature with the previous secret in its grace period: %v", err)
	}
	v.PreviousUntil = now.Add(-time.Second)
	if _, err := v.Check(strconv.FormatInt(now.Unix(), 10), sig, body); !errors.Is(err, verify.ErrPreviousExpired) {
		t.Fatalf("after the grace period: %v", err)
	}
	// SignStandard agrees with the official library, for a whsec_ secret
	// and a raw one.
	for _, secret := range []string{newSecret, "raw secret bytes"} {
		wh, err := standardwebhooks.NewWebhook(secret)
		if secret[0] != 'w' {
			wh, err = standardwebhooks.NewWebhookRaw([]byte(secret))
		}
		if err != nil {
			t.Fatal(err)
		}
		want, _ := wh.Sign("id-9", now, body)
		if got := verify.SignStandard([]byte(secret), "id-9", now.Unix(), body); got != want {
			t.Fatalf("%s: SignStandard %s, library %s", secret, got, want)
		}
	}
}

// A request as the worker sends it during a rotation: x-fluxora-signature
// with the new secret alone, webhook-signature with both. A consumer still
// holding only the old secret is accepted by the second; one holding neither
// is refused; and a webhook-signature that does not belong to the same
// delivery and timestamp is not consulted.
func TestBothFamiliesDuringRotation(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"amount":10}`)
	clock := func() time.Time { return now }
	worker := func(stdSecrets ...string) *http.Request {
		r := standardRequest(t, now, body, stdSecrets...)
		r.Header.Set("x-fluxora-delivery-id", "msg-1")
		r.Header.Set("x-fluxora-timestamp", strconv.FormatInt(now.Unix(), 10))
		r.Header.Set("x-fluxora-signature", verify.Sign([]byte(newSecret), now.Unix(), body))
		return r
	}
	for _, tc := range []struct {
		name   string
		secret string
		req    *http.Request
		want   error
	}{
		{"consumer on the new secret", newSecret, worker(newSecret, oldSecret), nil},
		{"consumer still on the old secret, in the grace period", oldSecret, worker(newSecret, oldSecret), nil},
		{"consumer on the old secret after the grace period", oldSecret, worker(newSecret), verify.ErrBadSignature},
		{"consumer on an unknown secret", "whsec_dW5rbm93bg==", worker(newSecret, oldSecret), verify.ErrBadSignature},
		{"webhook-id of another delivery", oldSecret, func() *http.Request {
			r := worker(newSecret, oldSecret)
			r.Header.Set("x-fluxora-delivery-id", "msg-2")
			return r
		}(), verify.ErrBadSignature},
	} {
		v := verify.Verifier{Secret: []byte(tc.secret), Now: clock}
		ev, err := v.Verify(tc.req)
		if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.want)
		}
		if err == nil && (ev.DeliveryID != "msg-1" || string(ev.Body) != string(body)) {
			t.Errorf("%s: event %+v", tc.name, ev)
		}
	}
}

// A whsec_ secret's base64 part may come with or without its '=' padding
// (the npm standardwebhooks and svix libraries decode both): the kit
// verifies the official library's signature either way. The official Go
// library (v1.3.0) decodes padded base64 only, so it signs with the padded
// form of the same key.
func TestWhsecSecretPaddedOrNot(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"amount":10}`)
	for _, key := range [][]byte{bytes.Repeat([]byte{0xfb}, 32), []byte("thirty-one bytes of key materia")} {
		padded := "whsec_" + base64.StdEncoding.EncodeToString(key)
		unpadded := "whsec_" + base64.RawStdEncoding.EncodeToString(key)
		for _, secret := range []string{padded, unpadded} {
			v := verify.Verifier{Secret: []byte(secret), Now: func() time.Time { return now }}
			if _, err := v.Verify(standardRequest(t, now, body, padded)); err != nil {
				t.Errorf("%d-byte key, secret %q: Verify = %v", len(key), secret, err)
			}
			wh, err := standardwebhooks.NewWebhook(padded)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := wh.Sign("id-9", now, body)
			if got := verify.SignStandard([]byte(secret), "id-9", now.Unix(), body); got != want {
				t.Errorf("%d-byte key, secret %q: SignStandard %s, library %s", len(key), secret, got, want)
			}
		}
	}
}
