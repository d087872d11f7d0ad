package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fluxora/webhook-worker/webhook"
)

// ErrSameSecret is returned (by the caller's seal function) to
// RotateEndpointSecret when the new secret is the endpoint's current one;
// nothing is changed.
var ErrSameSecret = errors.New("the new secret is the endpoint's current one")

// lockSecretSQL locks the endpoint named @name and reads its id and its
// current secret as stored: under the lock, the rotation that follows
// replaces the secret the caller compared.
const lockSecretSQL = `SELECT id::text, secret FROM webhook_endpoints WHERE name = @name FOR UPDATE`

// rotateSecretSQL makes @secret the secret of the endpoint @id and keeps
// @previous (the one it replaces, as the caller stored it again) until
// @grace_us microseconds from now by the database clock: the end is
// stored, so that a worker's restart neither extends nor shortens it. With
// a grace of 0 the old secret stops signing at once. A secret still in an
// earlier grace period is dropped: only the secret just replaced stays
// valid.
const rotateSecretSQL = `UPDATE webhook_endpoints SET
  secret = @secret,
  secret_previous = CASE WHEN @grace_us::bigint > 0 THEN @previous::text END,
  secret_previous_until = CASE WHEN @grace_us::bigint > 0 THEN now() + @grace_us::bigint * interval '1 microsecond' END
WHERE id = @id::uuid
RETURNING ` + endpointColumnsSQL

// Rotation is what RotateEndpointSecret writes: the new secret and the
// one it replaces, each as stored (sealed for the endpoint's id).
type Rotation struct {
	Secret, Previous string
}

// RotateEndpointSecret rotates the secret of the endpoint named name in
// one transaction: it locks the endpoint (lockSecretSQL), asks seal for the
// new secret and the current one as they are to be stored, given the
// endpoint's id and its current secret as stored (seal returns
// ErrSameSecret when the new secret is the current one), and writes them
// (rotateSecretSQL), the previous signing until grace (>= 0) from now, by
// the database clock.
func (s *Store) RotateEndpointSecret(ctx context.Context, name string, seal func(id, current string) (Rotation, error), grace time.Duration) (webhook.Endpoint, error) {
	var e webhook.Endpoint
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var id, current string
		if err := tx.QueryRow(ctx, lockSecretSQL, pgx.NamedArgs{"name": name}).Scan(&id, &current); err != nil {
			return err
		}
		r, err := seal(id, current)
		if err != nil {
			return err
		}
		e, err = scanEndpoint(tx.QueryRow(ctx, rotateSecretSQL, pgx.NamedArgs{"id": id, "secret": r.Secret, "previous": r.Previous,
			"grace_us": grace.Microseconds()}))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return webhook.Endpoint{}, fmt.Errorf("%w %q", ErrEndpointNotFound, name)
	}
	return e, err
}

// forgetExpiredSecretsSQL erases the previous secrets whose grace period
// has ended by the database clock. They sign nothing already (the claim
// hands them out only before the end): no secret outlives its use.
const forgetExpiredSecretsSQL = `UPDATE webhook_endpoints SET secret_previous = NULL, secret_previous_until = NULL
WHERE secret_previous_until <= now()`

// ForgetExpiredSecrets erases the expired previous secrets
// (forgetExpiredSecretsSQL) and returns how many it erased.
func (s *Store) ForgetExpiredSecrets(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, forgetExpiredSecretsSQL)
	return tag.RowsAffected(), err
}
