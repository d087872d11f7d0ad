package endpoints

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/signingkey"
)

// GraceDefault is how long a rotated-out secret keeps signing when
// RotateSecret is given no grace period: 24 hours.
const GraceDefault = 24 * time.Hour

// GraceMax is the longest grace period RotateSecret accepts: 30 days.
const GraceMax = 30 * 24 * time.Hour

// RotateSecret makes secret the signing secret of the endpoint named name
// and keeps its current one signing beside it (in webhook-signature) for
// grace, from 0 (the old secret stops at once) to GraceMax; the command
// line's default is GraceDefault. The new secret must differ from the
// current one. Bad values
// return a *FieldError ("secret" or "grace"), an unknown name ErrNotFound.
func (s *Store) RotateSecret(ctx context.Context, name, secret string, grace time.Duration) (Endpoint, error) {
	if err := validateSecret(secret); err != nil {
		return Endpoint{}, err
	}
	return s.rotate(ctx, name, func(string) (string, error) { return secret, nil }, grace)
}

// Issued is what a new secret gives its consumer, as the command that
// made it shows it: for an HMAC secret the secret itself, for an ed25519
// key its public key (the private key never leaves the catalog but
// sealed).
type Issued struct {
	Signing
	// Secret is the new HMAC secret (shown once); "" for an ed25519 key.
	Secret string
}

// RotateKey is RotateSecret with a new secret made here, of scheme
// (signingkey.HMAC or Ed25519; "": the scheme of the endpoint's current
// secret, so that a rotation keeps the consumers' kind of key). It
// returns what to give the consumer. A bad scheme is a *FieldError on
// "signature".
func (s *Store) RotateKey(ctx context.Context, name string, scheme signingkey.Scheme, grace time.Duration) (Endpoint, Issued, error) {
	if scheme != "" {
		if _, err := signingkey.ParseScheme(string(scheme)); err != nil {
			return Endpoint{}, Issued{}, invalid("signature", "%v", err)
		}
	}
	var made string
	e, err := s.rotate(ctx, name, func(current string) (string, error) {
		var err error
		made, err = signingkey.Generate(cmp.Or(scheme, signingkey.SchemeOf([]byte(current))))
		return made, err
	}, grace)
	if err != nil {
		return Endpoint{}, Issued{}, err
	}
	return e, issued(made), nil
}

// issued is what a new secret gives its consumer.
func issued(secret string) Issued {
	iss := Issued{Signing: SigningOf(secret)}
	if iss.Scheme == signingkey.HMAC {
		iss.Secret = secret
	}
	return iss
}

// rotate makes the secret next returns (given the current one, opened)
// the endpoint's, the current one signing beside it for grace.
func (s *Store) rotate(ctx context.Context, name string, next func(current string) (string, error), grace time.Duration) (Endpoint, error) {
	if grace < 0 || grace > GraceMax {
		return Endpoint{}, invalid("grace", "must be from 0 (none) to %s, got %s", GraceMax, grace)
	}
	if s.sealer == nil {
		return Endpoint{}, ErrNoSealer
	}
	e, err := s.db.RotateEndpointSecret(ctx, name, func(id, current string) (outbox.Rotation, error) {
		return s.rotation(id, current, next)
	}, grace)
	switch {
	case errors.Is(err, outbox.ErrSameSecret):
		return Endpoint{}, invalid("secret", "is the endpoint's current secret: give a new one")
	case errors.Is(err, outbox.ErrEndpointNotFound):
		return Endpoint{}, notFound(name)
	case err != nil:
		return Endpoint{}, dbError("rotate secret", name, err)
	}
	return e, nil
}

// rotation seals the secret next makes of the current one, and the
// current secret (as stored: sealed, or a plaintext stored before secrets
// were sealed, which is sealed now) for the endpoint id;
// outbox.ErrSameSecret when they are the same.
func (s *Store) rotation(id, current string, next func(current string) (string, error)) (outbox.Rotation, error) {
	old, err := s.sealer.OpenSecret(id, current)
	if err != nil {
		return outbox.Rotation{}, fmt.Errorf("open the current secret: %w", err)
	}
	secret, err := next(old)
	if err != nil {
		return outbox.Rotation{}, err
	}
	if subtle.ConstantTimeCompare([]byte(old), []byte(secret)) == 1 {
		return outbox.Rotation{}, outbox.ErrSameSecret
	}
	var r outbox.Rotation
	if r.Secret, err = s.sealer.SealSecret(id, secret); err != nil {
		return r, err
	}
	r.Previous, err = s.sealer.SealSecret(id, old)
	return r, err
}

// ForgetExpiredSecrets erases the previous secrets whose grace period has
// ended by the database clock (they sign nothing already: the claim hands
// them out only before the end), so that no secret outlives its use, and
// returns how many it erased. The janitor runs it on every pass.
func (s *Store) ForgetExpiredSecrets(ctx context.Context) (int64, error) {
	n, err := s.db.ForgetExpiredSecrets(ctx)
	if err != nil {
		return 0, fmt.Errorf("forget expired secrets: %w", err)
	}
	return n, nil
}
