// Package signingkey holds the rules of an endpoint's signing secret,
// shared by the catalog (package endpoints: what it accepts and makes),
// the sender (how it signs) and the consumers' kit (verify: the public
// keys it reads), so that they read a key alike.
//
// The scheme follows from the secret itself, as the Standard Webhooks
// specification lays the keys out: a secret is an ed25519 private key when
// it is "whsk_" followed by the standard base64 (padded or not) of a
// 64-byte ed25519 private key, its 32-byte seed then its public key (the
// layout of Go's crypto/ed25519, and Svix's); the public key matching the
// seed. Any other secret is an HMAC secret ("whsec_…" or the operator's
// own). The public key a consumer verifies with is "whpk_" and the padded
// standard base64 of its 32 bytes.
//
// No error of this package quotes a secret or a key.
package signingkey

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// The prefixes of the Standard Webhooks keys.
const (
	// SecretPrefix starts the HMAC secrets the worker makes.
	SecretPrefix = "whsec_"
	// PrivatePrefix starts an ed25519 private key (the worker's alone).
	PrivatePrefix = "whsk_"
	// PublicPrefix starts an ed25519 public key (the consumer's).
	PublicPrefix = "whpk_"
)

// Scheme is how a secret signs webhook-signature.
type Scheme string

// The schemes, as --signature spells them.
const (
	// HMAC: "v1," HMAC-SHA256 with a shared secret (also x-fluxora-signature).
	HMAC Scheme = "hmac"
	// Ed25519: "v1a," ed25519 with a private key; consumers hold its
	// public key.
	Ed25519 Scheme = "ed25519"
)

// ParseScheme reads a scheme's name ("hmac" or "ed25519").
func ParseScheme(name string) (Scheme, error) {
	switch s := Scheme(name); s {
	case HMAC, Ed25519:
		return s, nil
	}
	return "", fmt.Errorf("%q: must be hmac or ed25519", name)
}

// Private returns the ed25519 private key of secret, ok false when secret
// is not one (an HMAC secret; also a "whsk_" one that is not such a key,
// so that a secret stored before this rule keeps signing as it did).
func Private(secret []byte) (ed25519.PrivateKey, bool) {
	rest, ok := bytes.CutPrefix(secret, []byte(PrivatePrefix))
	if !ok {
		return nil, false
	}
	b := decodeBase64(string(rest))
	if len(b) != ed25519.PrivateKeySize {
		return nil, false
	}
	key := ed25519.NewKeyFromSeed(b[:ed25519.SeedSize])
	if !bytes.Equal(key, b) { // a public half that is not the seed's
		return nil, false
	}
	return key, true
}

// SchemeOf returns the scheme secret signs with: Ed25519 when Private
// reads it, HMAC otherwise.
func SchemeOf(secret []byte) Scheme {
	if _, ok := Private(secret); ok {
		return Ed25519
	}
	return HMAC
}

// Check refuses what may not become an endpoint's secret: a "whsk_" value
// that is not an ed25519 private key (mistyped, it would sign as an HMAC
// secret, which no consumer expects), and a "whpk_" public key (anyone
// holding it could sign). The error never quotes secret.
func Check(secret string) error {
	switch {
	case strings.HasPrefix(secret, PublicPrefix):
		return errors.New("is a public key (whpk_): the worker signs with the private key (whsk_); give that, or none to have one made")
	case strings.HasPrefix(secret, PrivatePrefix):
		if _, ok := Private([]byte(secret)); !ok {
			return errors.New("a whsk_ key must be whsk_ and the base64 of a 64-byte ed25519 private key (its seed, then its public key)")
		}
	}
	return nil
}

// Generate returns a new secret of scheme s: for HMAC "whsec_" and the
// standard base64 of 32 random bytes, for Ed25519 a new key pair's private
// key ("whsk_…").
func Generate(s Scheme) (string, error) {
	switch s {
	case HMAC:
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return "", fmt.Errorf("generate secret: %w", err)
		}
		return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
	case Ed25519:
		_, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return "", fmt.Errorf("generate key pair: %w", err)
		}
		return FormatPrivate(key), nil
	}
	return "", fmt.Errorf("generate secret: unknown scheme %q", s)
}

// FormatPrivate returns key as a secret: "whsk_" and its padded standard
// base64.
func FormatPrivate(key ed25519.PrivateKey) string {
	return PrivatePrefix + base64.StdEncoding.EncodeToString(key)
}

// FormatPublic returns key as consumers are given it: "whpk_" and its
// padded standard base64.
func FormatPublic(key ed25519.PublicKey) string {
	return PublicPrefix + base64.StdEncoding.EncodeToString(key)
}

// Public returns the public key ("whpk_…") a consumer verifies secret's
// signatures with; "" for an HMAC secret, which the consumer holds itself.
func Public(secret []byte) string {
	key, ok := Private(secret)
	if !ok {
		return ""
	}
	return FormatPublic(key.Public().(ed25519.PublicKey))
}

// ParsePublic reads a "whpk_" public key.
func ParsePublic(s string) (ed25519.PublicKey, error) {
	rest, ok := strings.CutPrefix(s, PublicPrefix)
	if b := decodeBase64(rest); ok && len(b) == ed25519.PublicKeySize {
		return b, nil
	}
	return nil, errors.New("a public key must be whpk_ and the base64 of a 32-byte ed25519 public key")
}

// decodeBase64 decodes standard base64, padded or not; nil when s is
// neither.
func decodeBase64(s string) []byte {
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b
	}
	if b, err := base64.RawStdEncoding.DecodeString(s); err == nil {
		return b
	}
	return nil
}
