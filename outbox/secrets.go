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

// The rotation's statements (queries/secrets.sql).
var (
	lockSecretSQL           = rawStatement("lock_secret")
	rotateSecretSQL         = rawStatement("rotate_secret")
	forgetExpiredSecretsSQL = rawStatement("forget_expired_secrets")
)

// lockedSecretRow is lock_secret's result.
type lockedSecretRow struct {
	ID     string `db:"id"`
	Secret string `db:"secret"`
}

// Rotation is what RotateEndpointSecret writes: the new secret and the
// one it replaces, each as stored (sealed for the endpoint's id).
type Rotation struct {
	Secret, Previous string
}

// RotateEndpointSecret rotates the secret of the endpoint named name in
// one transaction: it locks the endpoint (lock_secret), asks seal for the
// new secret and the current one as they are to be stored, given the
// endpoint's id and its current secret as stored (seal returns
// ErrSameSecret when the new secret is the current one), and writes them
// (rotate_secret), the previous signing until grace (>= 0) from now, by
// the database clock.
func (s *Store) RotateEndpointSecret(ctx context.Context, name string, seal func(id, current string) (Rotation, error), grace time.Duration) (webhook.Endpoint, error) {
	var e webhook.Endpoint
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, lockSecretSQL, pgx.NamedArgs{"name": name})
		if err != nil {
			return err
		}
		locked, err := pgx.CollectOneRow(rows, pgx.RowToStructByName[lockedSecretRow])
		if err != nil {
			return err
		}
		r, err := seal(locked.ID, locked.Secret)
		if err != nil {
			return err
		}
		rows, err = tx.Query(ctx, rotateSecretSQL, pgx.NamedArgs{"id": locked.ID, "secret": r.Secret, "previous": r.Previous,
			"grace_us": grace.Microseconds()})
		if err != nil {
			return err
		}
		// The columns are named as webhook.Endpoint's fields, in snake case.
		e, err = pgx.CollectOneRow(rows, pgx.RowToStructByName[webhook.Endpoint])
		if e.EventTypes == nil {
			e.EventTypes = []string{}
		}
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return webhook.Endpoint{}, fmt.Errorf("%w %q", ErrEndpointNotFound, name)
	}
	return e, err
}

// ForgetExpiredSecrets erases the expired previous secrets
// (forget_expired_secrets) and returns how many it erased.
func (s *Store) ForgetExpiredSecrets(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, forgetExpiredSecretsSQL)
	return tag.RowsAffected(), err
}
