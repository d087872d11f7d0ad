// Package sealed keeps the worker's stored credentials (endpoint signing
// secrets, client certificate keys) encrypted at rest: AEAD
// (XChaCha20-Poly1305, golang.org/x/crypto) under a key of the key file
// (WEBHOOK_SECRETS_KEY_FILE), the value's row and field bound as
// associated data, so that a value copied to another row or field does not
// open.
//
// A sealed value is text, stored in the column that used to hold the
// plaintext:
//
//	fxsealed:v1:<key id>:<base64 of the 24-byte nonce and the ciphertext>
//
// The key id says which key opens it; the first key of the file seals,
// every key of the file opens. A value without the prefix is a plaintext
// stored before secrets were sealed (IsSealed).
//
// No error of this package quotes a key, a plaintext or a ciphertext: only
// key ids, which are names, and line numbers of the key file.
package sealed

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/chacha20poly1305"
)

// Prefix starts every sealed value; version is the envelope's format.
const (
	Prefix  = "fxsealed:"
	version = "v1"
)

// KeySize is the size of a key, in bytes (32: 256 bits).
const KeySize = chacha20poly1305.KeySize

// ErrNoKeys is returned by Seal on a nil Keyring: no key file is
// configured.
var ErrNoKeys = errors.New("no key to seal with")

// ErrOpen is wrapped by Open when a value does not authenticate under the
// key its id names: another key under the same id, a value moved from
// another row or field, or a damaged value.
var ErrOpen = errors.New("does not open")

// MissingKeyError is returned by Open when the key id a value names is not
// in the Keyring (or there is no Keyring at all).
type MissingKeyError struct{ ID string }

func (e *MissingKeyError) Error() string {
	return fmt.Sprintf("sealed with key id %q, which the key file does not hold", e.ID)
}

// Keyring holds the keys of a key file: the first seals, all open. A nil
// *Keyring holds none. Safe for concurrent use.
type Keyring struct {
	ids  []string // in the file's order; ids[0] seals
	keys map[string][]byte
}

// Primary returns the id of the key that seals; "" for a nil Keyring.
func (k *Keyring) Primary() string {
	if k == nil {
		return ""
	}
	return k.ids[0]
}

// IDs returns every key id, the primary first.
func (k *Keyring) IDs() []string {
	if k == nil {
		return nil
	}
	return append([]string(nil), k.ids...)
}

// IsSealed reports whether v is a sealed value (else a plaintext).
func IsSealed(v string) bool { return strings.HasPrefix(v, Prefix) }

// KeyID returns the key id a sealed value names; ok is false for a
// plaintext or a value that is not a well-formed envelope.
func KeyID(v string) (id string, ok bool) {
	id, _, err := parse(v)
	return id, err == nil
}

// Seal encrypts plaintext under the primary key, bound to ad (see
// EndpointSecret, EndpointClientKey), with a fresh random nonce.
func (k *Keyring) Seal(plaintext []byte, ad string) (string, error) {
	if k == nil {
		return "", ErrNoKeys
	}
	id := k.ids[0]
	aead, err := chacha20poly1305.NewX(k.keys[id])
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal: %w", err)
	}
	head := header(id)
	out := aead.Seal(nonce, nonce, plaintext, []byte(head+ad))
	return head + base64.RawStdEncoding.EncodeToString(out), nil
}

// Open decrypts a sealed value bound to ad. A plaintext (no Prefix) is
// returned as it is: callers that must refuse plaintexts check IsSealed.
// An unknown key id is a *MissingKeyError; a value that does not
// authenticate wraps ErrOpen.
func (k *Keyring) Open(v, ad string) ([]byte, error) {
	if !IsSealed(v) {
		return []byte(v), nil
	}
	id, data, err := parse(v)
	if err != nil {
		return nil, err
	}
	var key []byte
	if k != nil {
		key = k.keys[id]
	}
	if key == nil {
		return nil, &MissingKeyError{ID: id}
	}
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, err
	}
	if len(data) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("sealed with key id %q: %w: too short", id, ErrOpen)
	}
	out, err := aead.Open(nil, data[:aead.NonceSize()], data[aead.NonceSize():], []byte(header(id)+ad))
	if err != nil {
		return nil, fmt.Errorf("sealed with key id %q: %w: another key under that id, or the value was moved from another row", id, ErrOpen)
	}
	return out, nil
}

// Reseal returns v sealed under the primary key (bound to ad): a plaintext
// is sealed, a value sealed under another key is opened and sealed again.
// changed is false when v was already sealed under the primary key (it is
// then returned as it is, after checking that it opens).
func (k *Keyring) Reseal(v, ad string) (out string, changed bool, err error) {
	plain, err := k.Open(v, ad)
	if err != nil {
		return "", false, err
	}
	if id, ok := KeyID(v); ok && id == k.Primary() {
		return v, false, nil
	}
	out, err = k.Seal(plain, ad)
	return out, err == nil, err
}

// EndpointSecret is the associated data of an endpoint's signing secrets
// (current and previous: a rotation moves one to the other), id its uuid.
func EndpointSecret(id string) string { return "webhook_endpoints/" + id + "/secret" }

// EndpointClientKey is the associated data of an endpoint's client
// certificate key.
func EndpointClientKey(id string) string { return "webhook_endpoints/" + id + "/client_key" }

func header(id string) string { return Prefix + version + ":" + id + ":" }

// parse splits a sealed value into its key id and its nonce and
// ciphertext.
func parse(v string) (id string, data []byte, err error) {
	rest, ok := strings.CutPrefix(v, Prefix+version+":")
	if !ok {
		return "", nil, errors.New("not a sealed value of a known version")
	}
	id, enc, ok := strings.Cut(rest, ":")
	if !ok || !validID(id) {
		return "", nil, errors.New("sealed value without a valid key id")
	}
	data, err = base64.RawStdEncoding.DecodeString(enc)
	if err != nil {
		return "", nil, fmt.Errorf("sealed with key id %q: %w: not base64", id, ErrOpen)
	}
	return id, data, nil
}
