package endpoints

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// GraceDefault is how long a rotated-out secret keeps signing when
// RotateSecret is given no grace period: 24 hours.
const GraceDefault = 24 * time.Hour

// GraceMax is the longest grace period RotateSecret accepts: 30 days.
const GraceMax = 30 * 24 * time.Hour

// rotateSQL makes $2 the secret and keeps the one it replaces until $3
// microseconds from now by the database clock: the end is stored, so that
// a worker's restart neither extends nor shortens it. With a grace of 0 the
// old secret stops signing at once. A secret still in an earlier grace
// period is dropped: only the secret just replaced stays valid.
const rotateSQL = `UPDATE webhook_endpoints SET
  secret = $2,
  secret_previous = CASE WHEN $3::bigint > 0 THEN secret END,
  secret_previous_until = CASE WHEN $3::bigint > 0 THEN now() + $3::bigint * interval '1 microsecond' END
WHERE name = $1
RETURNING ` + columns

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
	if grace < 0 || grace > GraceMax {
		return Endpoint{}, invalid("grace", "must be from 0 (none) to %s, got %s", GraceMax, grace)
	}
	var e Endpoint
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var same bool
		if err := tx.QueryRow(ctx, `SELECT secret = $2 FROM webhook_endpoints WHERE name = $1 FOR UPDATE`, name, secret).Scan(&same); err != nil {
			return err
		}
		if same {
			return invalid("secret", "is the endpoint's current secret: give a new one")
		}
		var err error
		e, err = scan(tx.QueryRow(ctx, rotateSQL, name, secret, grace.Microseconds()))
		return err
	})
	var fe *FieldError
	switch {
	case errors.As(err, &fe):
		return Endpoint{}, err
	case errors.Is(err, pgx.ErrNoRows):
		return Endpoint{}, notFound(name)
	case err != nil:
		return Endpoint{}, dbError("rotate secret", name, err)
	}
	return e, nil
}

// ForgetExpiredSecrets erases the previous secrets whose grace period has
// ended by the database clock (they sign nothing already: the claim hands
// them out only before the end), so that no secret outlives its use, and
// returns how many it erased. The janitor runs it on every pass.
func (s *Store) ForgetExpiredSecrets(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE webhook_endpoints SET secret_previous = NULL, secret_previous_until = NULL
		WHERE secret_previous_until <= now()`)
	if err != nil {
		return 0, fmt.Errorf("forget expired secrets: %w", err)
	}
	return tag.RowsAffected(), nil
}
