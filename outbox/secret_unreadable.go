package outbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// MarkSecretUnreadableSQL records that a worker cannot open endpoint @id's
// secret (migration 021): @reason names the credential and the key id,
// never a value; the time is the database's. `worker status` and the
// console read the mark (EndpointStatusSQL).
const MarkSecretUnreadableSQL = `UPDATE webhook_endpoints
SET secret_unreadable = @reason::text, secret_unreadable_at = now()
WHERE id = @id::uuid`

// ClearSecretUnreadableSQL removes endpoint @id's mark, or every mark when
// @id is NULL; a row without one is not written.
const ClearSecretUnreadableSQL = `UPDATE webhook_endpoints
SET secret_unreadable = NULL, secret_unreadable_at = NULL
WHERE secret_unreadable IS NOT NULL AND (@id::uuid IS NULL OR id = @id::uuid)`

// MarkSecretUnreadable records that the worker cannot open the secret of
// endpoint id (uuid text), and why.
func (s *Store) MarkSecretUnreadable(ctx context.Context, id, reason string) error {
	if _, err := s.pool.Exec(ctx, MarkSecretUnreadableSQL, pgx.NamedArgs{"id": id, "reason": reason}); err != nil {
		return fmt.Errorf("mark the endpoint's secret unreadable: %w", err)
	}
	return nil
}

// ClearSecretUnreadable removes the mark of endpoint id (uuid text), or
// every endpoint's when id is "".
func (s *Store) ClearSecretUnreadable(ctx context.Context, id string) error {
	var arg any
	if id != "" {
		arg = id
	}
	if _, err := s.pool.Exec(ctx, ClearSecretUnreadableSQL, pgx.NamedArgs{"id": arg}); err != nil {
		return fmt.Errorf("clear the endpoints' unreadable-secret marks: %w", err)
	}
	return nil
}
