package endpoints

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/fluxora/webhook-worker/outbox"
)

// Sealer seals the credentials the store writes, and opens the stored
// secret a rotation compares with the new one and the client keys
// LoadClientCerts reads, each bound to its endpoint's id (uuid text).
// cmd/worker adapts package sealed's Keyring. OpenSecret and OpenClientKey
// return a plaintext stored before credentials were sealed as it is.
type Sealer interface {
	SealSecret(endpointID, secret string) (string, error)
	OpenSecret(endpointID, stored string) (string, error)
	SealClientKey(endpointID string, keyPEM []byte) (string, error)
	OpenClientKey(endpointID, stored string) ([]byte, error)
}

// ErrNoSealer is returned by the methods that store a secret or a client
// key when the Store has no Sealer: credentials are only ever stored
// sealed.
var ErrNoSealer = errors.New("credentials are stored sealed, and no key is configured to seal them")

// ClientCert is a client certificate for mutual TLS: its PEM chain (leaf
// first) and its private key's PEM. Both empty: remove the endpoint's
// certificate (Update).
type ClientCert struct {
	CertPEM, KeyPEM []byte
}

// newID returns a random (version 4) uuid, the id of a new endpoint, known
// before its insert so that its secret is sealed bound to it.
func newID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("endpoint id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:]), nil
}

// sealSecret seals secret for the endpoint id.
func (s *Store) sealSecret(id, secret string) (string, error) {
	if s.sealer == nil {
		return "", ErrNoSealer
	}
	return s.sealer.SealSecret(id, secret)
}

// storedCert checks c (a certificate and the key that matches it, not
// expired by the process clock) and returns it as stored for the endpoint
// id: the certificates alone re-encoded (anything else in the file, a key
// above all, is dropped) and the key sealed. nil for nil; an empty
// StoredCert (removal) for an empty c. Errors are *FieldError on
// client-cert-file, never quoting the files.
func (s *Store) storedCert(id string, c *ClientCert) (*outbox.StoredCert, error) {
	switch {
	case c == nil:
		return nil, nil
	case len(c.CertPEM) == 0 && len(c.KeyPEM) == 0:
		return &outbox.StoredCert{}, nil
	case s.sealer == nil:
		return nil, ErrNoSealer
	}
	pair, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		return nil, invalid("client-cert-file", "with --client-key-file: %v", err)
	}
	if now := s.now(); now.After(pair.Leaf.NotAfter) {
		return nil, invalid("client-cert-file", "the certificate expired on %s", pair.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	var chain []byte
	for _, der := range pair.Certificate {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	key, err := s.sealer.SealClientKey(id, c.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("seal client key: %w", err)
	}
	return &outbox.StoredCert{CertPEM: string(chain), Key: key, NotAfter: pair.Leaf.NotAfter}, nil
}
