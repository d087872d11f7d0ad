package sender_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/sender"
	"github.com/fluxora/webhook-worker/signingkey"
)

// rfc8032Seed is the secret key of RFC 8032's first Ed25519 test vector;
// its public key is d75a9801…511a.
const rfc8032Seed = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"

// ed25519Vector was computed outside Go, with that key as PKCS#8 (k.pem):
//
//	printf 'msg_1.1700000000.{"a":1}' | openssl pkeyutl -sign -inkey k.pem -rawin | base64
const ed25519Vector = "0pYc3grQLAYTYYtSm9Z+VOqkyvPhiL3xzHrpcxS6/6sXV93wWnX+gE4ZSgyOhnhCp3VTI/jx2HUyQVOO3T5OCg=="

func vectorKey(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	seed, err := hex.DecodeString(rfc8032Seed)
	if err != nil {
		t.Fatal(err)
	}
	return ed25519.NewKeyFromSeed(seed)
}

func newKey(t testing.TB) string {
	t.Helper()
	k, err := signingkey.Generate(signingkey.Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSignEd25519KnownVector(t *testing.T) {
	t.Parallel()
	key := vectorKey(t)
	if pub := hex.EncodeToString(key.Public().(ed25519.PublicKey)); pub != "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a" {
		t.Fatalf("public key %s is not RFC 8032's", pub)
	}
	if got := sender.SignEd25519(key, "msg_1", 1700000000, []byte(`{"a":1}`)); got != "v1a,"+ed25519Vector {
		t.Fatalf("SignEd25519 = %s, want v1a,%s", got, ed25519Vector)
	}
}

// received is one request as a loopback consumer read it.
type received struct {
	h    http.Header
	body []byte
}

// sendWith sends testRequest with cfg (its URL set here) to a loopback
// consumer and returns what it received.
func sendWith(t *testing.T, cfg sender.Config) received {
	t.Helper()
	got := make(chan received, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- received{r.Header.Clone(), b}
	}))
	defer srv.Close()
	cfg.URL = srv.URL
	s, err := sender.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if res := s.Send(t.Context(), testRequest()); res.Outcome != sender.Delivered {
		t.Fatalf("%+v", res)
	}
	return <-got
}

// specVerify checks a request as the Standard Webhooks specification
// writes it, with Go's crypto/ed25519 alone: some "v1a," entry of the
// space-separated webhook-signature is the standard base64 of an ed25519
// signature, by the public key whpk (the base64 after "whpk_"), of
// webhook-id + "." + webhook-timestamp + "." + body.
func specVerify(t *testing.T, whpk string, r received) bool {
	t.Helper()
	pub, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(whpk, "whpk_"))
	if err != nil || len(pub) != ed25519.PublicKeySize {
		t.Fatalf("public key %q: %v", whpk, err)
	}
	content := r.h.Get("Webhook-Id") + "." + r.h.Get("Webhook-Timestamp") + "." + string(r.body)
	for _, entry := range strings.Split(r.h.Get("Webhook-Signature"), " ") {
		version, sig, _ := strings.Cut(entry, ",")
		raw, err := base64.StdEncoding.DecodeString(sig)
		if version == "v1a" && err == nil && ed25519.Verify(pub, []byte(content), raw) {
			return true
		}
	}
	return false
}

// An ed25519 key signs webhook-signature "v1a," over the content "v1,"
// signs, verified by the specification's text; its requests carry the
// Standard Webhooks headers even when Headers asks for the Fluxora ones
// alone, and no x-fluxora-signature: an HMAC keyed with the private key
// is of no use to a consumer holding the public key.
func TestEd25519KeySignsV1a(t *testing.T) {
	t.Parallel()
	secret, other := newKey(t), newKey(t)
	for _, h := range []sender.Headers{0, sender.FluxoraHeaders, sender.StandardHeaders} {
		r := sendWith(t, sender.Config{Secret: []byte(secret), Headers: h})
		if !specVerify(t, signingkey.Public([]byte(secret)), r) {
			t.Fatalf("headers %d: webhook-signature %q does not verify", h, r.h.Get("Webhook-Signature"))
		}
		if specVerify(t, signingkey.Public([]byte(other)), r) {
			t.Fatalf("headers %d: another key's public key verifies the request", h)
		}
		tampered := r
		tampered.body = append([]byte(nil), r.body...)
		tampered.body[0] ^= 1
		if specVerify(t, signingkey.Public([]byte(secret)), tampered) {
			t.Fatalf("headers %d: a changed body verifies", h)
		}
		if _, ok := r.h["X-Fluxora-Signature"]; ok {
			t.Fatalf("headers %d: x-fluxora-signature sent with an ed25519 key", h)
		}
		if r.h.Get("X-Fluxora-Timestamp") != r.h.Get("Webhook-Timestamp") || r.h.Get("Webhook-Id") != testRequest().DeliveryID {
			t.Fatalf("headers %d: timestamps %q and %q, id %q", h, r.h.Get("X-Fluxora-Timestamp"), r.h.Get("Webhook-Timestamp"), r.h.Get("Webhook-Id"))
		}
		for _, name := range []string{"Webhook-Signature", "X-Fluxora-Timestamp", "X-Fluxora-Delivery-Id", "X-Fluxora-Event"} {
			if strings.Contains(strings.Join(r.h.Values(name), " "), strings.TrimPrefix(secret, "whsk_")[:20]) {
				t.Fatalf("headers %d: %s holds the private key", h, name)
			}
		}
	}
}

// A rotation between keys, or between the schemes, signs webhook-signature
// with both during the grace period, each by its own scheme and the new
// one first; x-fluxora-signature, when the new secret is an HMAC secret,
// is its alone. After the grace period only the new one signs.
func TestRotationAcrossSchemes(t *testing.T) {
	t.Parallel()
	const hmacSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	edOld, edNew := newKey(t), newKey(t)
	for _, tc := range []struct {
		name          string
		current, prev string
		want          string // the versions in webhook-signature during the grace
	}{
		{"ed25519 to ed25519", edNew, edOld, "v1a v1a"},
		{"hmac to ed25519", edNew, hmacSecret, "v1a v1"},
		{"ed25519 to hmac", hmacSecret, edOld, "v1 v1a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, until := range []time.Time{time.Now().Add(time.Hour), time.Now().Add(-time.Second)} {
				r := sendWith(t, sender.Config{Secret: []byte(tc.current), PreviousSecret: []byte(tc.prev), PreviousUntil: until})
				var versions []string
				for _, e := range strings.Fields(r.h.Get("Webhook-Signature")) {
					v, _, _ := strings.Cut(e, ",")
					versions = append(versions, v)
				}
				want := tc.want
				if until.Before(time.Now()) {
					want, _, _ = strings.Cut(want, " ")
				}
				if got := strings.Join(versions, " "); got != want {
					t.Fatalf("until %s: webhook-signature versions %q, want %q", until.Format(time.Kitchen), got, want)
				}
				req, ts := testRequest(), mustInt(t, r.h.Get("Webhook-Timestamp"))
				for i, secret := range []string{tc.current, tc.prev}[:len(versions)] {
					var entry string
					if key, ok := signingkey.Private([]byte(secret)); ok {
						entry = sender.SignEd25519(key, req.DeliveryID, ts, req.Payload)
					} else {
						entry = sender.SignStandard(sender.StandardKey([]byte(secret)), req.DeliveryID, ts, req.Payload)
					}
					if strings.Fields(r.h.Get("Webhook-Signature"))[i] != entry {
						t.Fatalf("until %s: signature %d is not %s's", until.Format(time.Kitchen), i, []string{"the new key", "the old key"}[i])
					}
				}
				flux, sent := r.h["X-Fluxora-Signature"]
				if isHMAC := signingkey.SchemeOf([]byte(tc.current)) == signingkey.HMAC; sent != isHMAC ||
					isHMAC && flux[0] != sender.Sign([]byte(tc.current), ts, req.Payload) {
					t.Fatalf("x-fluxora-signature %q (sent %v) with a current %s secret", flux, sent, signingkey.SchemeOf([]byte(tc.current)))
				}
			}
		})
	}
}

// A stored secret that starts with whsk_ but is not an ed25519 key (stored
// before the rule, say) keeps signing as the HMAC secret it was.
func TestWhskThatIsNotAKeyStaysHMAC(t *testing.T) {
	t.Parallel()
	const secret = "whsk_an-old-hmac-secret"
	r := sendWith(t, sender.Config{Secret: []byte(secret)})
	ts := mustInt(t, r.h.Get("Webhook-Timestamp"))
	req := testRequest()
	if got, want := r.h.Get("Webhook-Signature"), sender.SignStandard(sender.StandardKey([]byte(secret)), req.DeliveryID, ts, req.Payload); got != want {
		t.Fatalf("webhook-signature %q, want the HMAC %q", got, want)
	}
	if got := r.h.Get("X-Fluxora-Signature"); got != sender.Sign([]byte(secret), ts, req.Payload) {
		t.Fatalf("x-fluxora-signature %q", got)
	}
}

func BenchmarkSignStandard(b *testing.B) {
	body := []byte(`{"amount": 10, "currency": "EUR", "invoice": "in_1"}`)
	b.Run("hmac", func(b *testing.B) {
		key := sender.StandardKey([]byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))
		b.ReportAllocs()
		for b.Loop() {
			sender.SignStandard(key, "0b8c0a1e-7a43-4c0a-9d6e-1f2a3b4c5d01", 1700000000, body)
		}
	})
	b.Run("ed25519", func(b *testing.B) {
		key := vectorKey(b)
		b.ReportAllocs()
		for b.Loop() {
			sender.SignEd25519(key, "0b8c0a1e-7a43-4c0a-9d6e-1f2a3b4c5d01", 1700000000, body)
		}
	})
}
