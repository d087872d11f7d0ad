package outbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The marks of a secret a worker cannot open (queries/secrets.sql).
var (
	markSecretUnreadableSQL  = rawStatement("mark_secret_unreadable")
	clearSecretUnreadableSQL = rawStatement("clear_secret_unreadable")
)

// MarkSecretUnreadable records that the worker cannot open the secret of
// endpoint id (uuid text), and why (mark_secret_unreadable).
func (s *Store) MarkSecretUnreadable(ctx context.Context, id, reason string) error {
	if _, err := s.pool.Exec(ctx, markSecretUnreadableSQL, pgx.NamedArgs{"id": id, "reason": reason}); err != nil {
		return fmt.Errorf("mark the endpoint's secret unreadable: %w", err)
	}
	return nil
}

// ClearSecretUnreadable removes the mark of endpoint id (uuid text), or
// every endpoint's when id is "" (clear_secret_unreadable).
func (s *Store) ClearSecretUnreadable(ctx context.Context, id string) error {
	var arg any
	if id != "" {
		arg = id
	}
	if _, err := s.pool.Exec(ctx, clearSecretUnreadableSQL, pgx.NamedArgs{"id": arg}); err != nil {
		return fmt.Errorf("clear the endpoints' unreadable-secret marks: %w", err)
	}
	return nil
}
