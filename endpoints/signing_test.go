package endpoints_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/endpoints"
	"github.com/fluxora/webhook-worker/signingkey"
)

func ed25519Key(t *testing.T) string {
	t.Helper()
	k, err := signingkey.Generate(signingkey.Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// An endpoint given a whsk_ key signs with ed25519: Signing shows the
// scheme and the public key, never the private one; an HMAC endpoint shows
// its scheme alone.
func TestSigningShowsThePublicKey(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	key := ed25519Key(t)
	ed, err := s.Create(ctx, endpoints.NewEndpoint{Name: "ledger", URL: "https://hooks.example.com/ledger", Secret: key})
	if err != nil {
		t.Fatal(err)
	}
	hm := add(t, s, "billing")
	got, err := s.Signing(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]endpoints.Signing{
		ed.ID: {Scheme: signingkey.Ed25519, PublicKey: signingkey.Public([]byte(key))},
		hm.ID: {Scheme: signingkey.HMAC},
	}
	if len(got) != 2 || got[ed.ID] != want[ed.ID] || got[hm.ID] != want[hm.ID] {
		t.Fatalf("Signing = %+v, want %+v", got, want)
	}
	js, _ := json.Marshal(got)
	if strings.Contains(string(js), key[5:20]) || !strings.Contains(string(js), `"public_key":"whpk_`) {
		t.Fatalf("Signing's JSON: %s", js)
	}
	if _, err := (&endpoints.Store{}).Signing(ctx); !errors.Is(err, endpoints.ErrNoSealer) {
		t.Fatalf("without a Sealer: %v", err)
	}
}

// What may not become a secret is refused on "secret", the value never
// quoted: a whsk_ value that is not a key, a whpk_ public key.
func TestKeyRefusals(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	add(t, s, "billing")
	pub := signingkey.Public([]byte(ed25519Key(t)))
	for _, bad := range []string{"whsk_Zm9yZ2VkLWtleS10aGF0LWlzLW5vdC1vbmU=", pub} {
		_, errCreate := s.Create(ctx, endpoints.NewEndpoint{Name: "x", URL: "https://hooks.example.com/x", Secret: bad})
		_, errUpdate := s.Update(ctx, "billing", endpoints.Update{Secret: &bad})
		_, errRotate := s.RotateSecret(ctx, "billing", bad, time.Hour)
		for op, err := range map[string]error{"create": errCreate, "update": errUpdate, "rotate": errRotate} {
			var fe *endpoints.FieldError
			if !errors.As(err, &fe) || fe.Field != "secret" || strings.Contains(err.Error(), bad[5:]) {
				t.Fatalf("%s with %.9s…: %v, want a FieldError on secret that does not quote it", op, bad, err)
			}
		}
	}
	if _, _, err := s.RotateKey(ctx, "billing", "rsa", time.Hour); err == nil || !strings.HasPrefix(err.Error(), "signature:") {
		t.Fatalf("RotateKey with scheme rsa: %v", err)
	}
}

// RotateKey makes the new secret itself: of the current secret's scheme
// unless told, the old one signing beside it for the grace. It returns
// what the consumer is given: the HMAC secret, or the public key (the
// private key stays sealed in the table).
func TestRotateKey(t *testing.T) {
	t.Parallel()
	s, b := setup(t)
	ctx := context.Background()
	if _, err := s.Create(ctx, endpoints.NewEndpoint{Name: "ledger", URL: "https://hooks.example.com/ledger", Secret: ed25519Key(t)}); err != nil {
		t.Fatal(err)
	}
	add(t, s, "billing")
	for _, tc := range []struct {
		name   string
		scheme signingkey.Scheme
		want   signingkey.Scheme
	}{
		{"ledger", "", signingkey.Ed25519},
		{"billing", "", signingkey.HMAC},
		{"billing", signingkey.Ed25519, signingkey.Ed25519}, // from HMAC to ed25519
	} {
		before, _, _ := secrets(t, s, tc.name, b)
		e, iss, err := s.RotateKey(ctx, tc.name, tc.scheme, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		cur, prev, until := secrets(t, s, tc.name, b)
		if prev != before || until == nil || e.PreviousSecretUntil == nil || cur == before {
			t.Fatalf("%s %q: the previous secret is not the one replaced, or no grace", tc.name, tc.scheme)
		}
		if signingkey.SchemeOf([]byte(cur)) != tc.want || iss.Scheme != tc.want {
			t.Fatalf("%s %q: made a %s secret, said %s, want %s", tc.name, tc.scheme, signingkey.SchemeOf([]byte(cur)), iss.Scheme, tc.want)
		}
		switch tc.want {
		case signingkey.Ed25519:
			if iss.Secret != "" || iss.PublicKey != signingkey.Public([]byte(cur)) {
				t.Fatalf("%s: issued %+v, want the public key alone", tc.name, iss)
			}
		default:
			if iss.Secret != cur || iss.PublicKey != "" || !strings.HasPrefix(cur, "whsec_") {
				t.Fatalf("%s: issued a secret that is not the one stored", tc.name)
			}
		}
	}
}
