package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fluxora/webhook-worker/webhook"
)

// ErrSameSecret is returned by RotateEndpointSecret when the new secret is
// the endpoint's current one; nothing is changed.
var ErrSameSecret = errors.New("the new secret is the endpoint's current one")

// sameSecretSQL locks the endpoint named @name and says whether @secret is
// its current secret: under the lock, the rotation that follows replaces the
// secret this compared.
const sameSecretSQL = `SELECT secret = @secret FROM webhook_endpoints WHERE name = @name FOR UPDATE`

// rotateSecretSQL makes @secret the secret of the endpoint named @name and
// keeps the one it replaces until @grace_us microseconds from now by the
// database clock: the end is stored, so that a worker's restart neither
// extends nor shortens it. With a grace of 0 the old secret stops signing
// at once. A secret still in an earlier grace period is dropped: only the
// secret just replaced stays valid.
const rotateSecretSQL = `UPDATE webhook_endpoints SET
  secret = @secret,
  secret_previous = CASE WHEN @grace_us::bigint > 0 THEN secret END,
  secret_previous_until = CASE WHEN @grace_us::bigint > 0 THEN now() + @grace_us::bigint * interval '1 microsecond' END
WHERE name = @name
RETURNING ` + endpointColumnsSQL

// RotateEndpointSecret makes secret the signing secret of the endpoint
// named name and keeps its current one signing until grace (>= 0) from
// now, by the database clock, in one transaction (sameSecretSQL, then
// rotateSecretSQL). A secret equal to the current one returns
// ErrSameSecret.
func (s *Store) RotateEndpointSecret(ctx context.Context, name, secret string, grace time.Duration) (webhook.Endpoint, error) {
	var e webhook.Endpoint
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var same bool
		if err := tx.QueryRow(ctx, sameSecretSQL, pgx.NamedArgs{"name": name, "secret": secret}).Scan(&same); err != nil {
			return err
		}
		if same {
			return ErrSameSecret
		}
		var err error
		e, err = scanEndpoint(tx.QueryRow(ctx, rotateSecretSQL, pgx.NamedArgs{"name": name, "secret": secret, "grace_us": grace.Microseconds()}))
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
