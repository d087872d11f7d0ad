package endpoints

import (
	"context"
	"fmt"

	"github.com/fluxora/webhook-worker/signingkey"
)

// Signing is how an endpoint signs, as its operator is shown it: the
// scheme of its secret and, for ed25519, the public key its consumers
// verify with. Never the secret.
type Signing struct {
	Scheme signingkey.Scheme `json:"signature"`
	// PublicKey is "whpk_…" for an ed25519 key, "" for an HMAC secret.
	PublicKey string `json:"public_key,omitempty"`
}

// SigningOf returns how secret signs.
func SigningOf(secret string) Signing {
	if pub := signingkey.Public([]byte(secret)); pub != "" {
		return Signing{Scheme: signingkey.Ed25519, PublicKey: pub}
	}
	return Signing{Scheme: signingkey.HMAC}
}

// Signing returns how each endpoint signs, by id, its secret opened with
// the Sealer (the scheme is in the secret, sealed at rest). An endpoint
// whose secret does not open is left out. Without a Sealer: ErrNoSealer.
func (s *Store) Signing(ctx context.Context) (map[string]Signing, error) {
	if s.sealer == nil {
		return nil, ErrNoSealer
	}
	all, err := s.db.Credentials(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the endpoints' secrets: %w", err)
	}
	out := make(map[string]Signing, len(all))
	for _, c := range all {
		if secret, err := s.sealer.OpenSecret(c.ID, c.Secret); err == nil {
			out[c.ID] = SigningOf(secret)
		}
	}
	return out, nil
}
