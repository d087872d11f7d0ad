package signingkey_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/fluxora/webhook-worker/signingkey"
)

// RFC 8032's first Ed25519 test vector: its secret key (seed) and public
// key.
const (
	vectorSeed   = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
	vectorPublic = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
)

func vector(t *testing.T) (seed, pub []byte) {
	t.Helper()
	seed, _ = hex.DecodeString(vectorSeed)
	pub, _ = hex.DecodeString(vectorPublic)
	return seed, pub
}

func TestReadsTheSpecificationsLayout(t *testing.T) {
	t.Parallel()
	seed, pub := vector(t)
	full := append(append([]byte(nil), seed...), pub...) // seed, then public key: 64 bytes
	for name, secret := range map[string]string{
		"padded":   "whsk_" + base64.StdEncoding.EncodeToString(full),
		"unpadded": "whsk_" + base64.RawStdEncoding.EncodeToString(full),
	} {
		key, ok := signingkey.Private([]byte(secret))
		if !ok || !key.Equal(ed25519.NewKeyFromSeed(seed)) {
			t.Fatalf("%s: Private did not read the key", name)
		}
		if got, want := signingkey.Public([]byte(secret)), "whpk_"+base64.StdEncoding.EncodeToString(pub); got != want {
			t.Fatalf("%s: Public = %s, want %s", name, got, want)
		}
		if signingkey.SchemeOf([]byte(secret)) != signingkey.Ed25519 || signingkey.Check(secret) != nil {
			t.Fatalf("%s: not taken as an ed25519 key", name)
		}
	}
	if got := signingkey.FormatPrivate(ed25519.NewKeyFromSeed(seed)); got != "whsk_"+base64.StdEncoding.EncodeToString(full) {
		t.Fatalf("FormatPrivate = %s", got)
	}
}

// Anything but a whsk_ ed25519 key is an HMAC secret to the sender; what
// the catalog refuses at input is a whsk_ value that is not a key, and a
// whpk_ public key. No refusal quotes the value.
func TestSchemesAndRefusals(t *testing.T) {
	t.Parallel()
	seed, pub := vector(t)
	otherPub := ed25519.NewKeyFromSeed(make([]byte, 32)).Public().(ed25519.PublicKey)
	for _, tc := range []struct {
		name, secret string
		refused      string // what Check says, "" for accepted
	}{
		{"a whsec_ secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", ""},
		{"a secret of one's own", "a shared secret", ""},
		{"a seed alone", "whsk_" + base64.StdEncoding.EncodeToString(seed), "64-byte"},
		{"a public half that is not the seed's", "whsk_" + base64.StdEncoding.EncodeToString(append(append([]byte(nil), seed...), otherPub...)), "64-byte"},
		{"not base64", "whsk_not*base64*at*all", "64-byte"},
		{"empty after the prefix", "whsk_", "64-byte"},
		{"a public key", "whpk_" + base64.StdEncoding.EncodeToString(pub), "public key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, ok := signingkey.Private([]byte(tc.secret)); ok || signingkey.SchemeOf([]byte(tc.secret)) != signingkey.HMAC ||
				signingkey.Public([]byte(tc.secret)) != "" {
				t.Fatal("taken as an ed25519 key")
			}
			err := signingkey.Check(tc.secret)
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
				t.Fatalf("Check = %v, want a refusal saying %q", err, tc.refused)
			case err != nil && len(tc.secret) > 5 && strings.Contains(err.Error(), tc.secret[5:]):
				t.Fatalf("the refusal quotes the value: %v", err)
			}
		})
	}
}

func TestGenerate(t *testing.T) {
	t.Parallel()
	a, err := signingkey.Generate(signingkey.Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := signingkey.Generate(signingkey.Ed25519)
	key, ok := signingkey.Private([]byte(a))
	if !ok || a == b || len(a) != len("whsk_")+88 {
		t.Fatalf("Generate(ed25519) gave %d characters, readable %v, distinct %v", len(a), ok, a != b)
	}
	pub, err := signingkey.ParsePublic(signingkey.Public([]byte(a)))
	if err != nil || !pub.Equal(key.Public()) {
		t.Fatalf("ParsePublic(Public(key)) = %x, %v", pub, err)
	}
	msg := []byte("msg_1.1700000000.{}")
	if !ed25519.Verify(pub, msg, ed25519.Sign(key, msg)) {
		t.Fatal("the public key does not verify the private key's signature")
	}
	h, err := signingkey.Generate(signingkey.HMAC)
	h2, _ := signingkey.Generate(signingkey.HMAC)
	raw, derr := base64.StdEncoding.DecodeString(strings.TrimPrefix(h, "whsec_"))
	if err != nil || !strings.HasPrefix(h, "whsec_") || derr != nil || len(raw) != 32 || h == h2 {
		t.Fatalf("Generate(hmac): %d characters, %v, %v, distinct %v", len(h), err, derr, h != h2)
	}
	if _, err := signingkey.Generate("rsa"); err == nil {
		t.Fatal("Generate made a key of an unknown scheme")
	}
}

func TestParseSchemeAndPublic(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"hmac", "ed25519"} {
		if s, err := signingkey.ParseScheme(name); err != nil || string(s) != name {
			t.Fatalf("ParseScheme(%q) = %q, %v", name, s, err)
		}
	}
	for _, name := range []string{"", "HMAC", "v1a", "rsa"} {
		if _, err := signingkey.ParseScheme(name); err == nil {
			t.Fatalf("ParseScheme(%q) accepted", name)
		}
	}
	_, pub := vector(t)
	for _, bad := range []string{"", "whpk_", "whpk_" + base64.StdEncoding.EncodeToString(pub[:31]), base64.StdEncoding.EncodeToString(pub),
		"whsk_" + base64.StdEncoding.EncodeToString(pub)} {
		if _, err := signingkey.ParsePublic(bad); err == nil {
			t.Fatalf("ParsePublic(%q) accepted", bad)
		}
	}
	if got, err := signingkey.ParsePublic("whpk_" + base64.RawStdEncoding.EncodeToString(pub)); err != nil || !got.Equal(ed25519.PublicKey(pub)) {
		t.Fatalf("ParsePublic of unpadded base64: %x, %v", got, err)
	}
}
