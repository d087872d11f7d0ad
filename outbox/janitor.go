package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// failingEndpointsSQL finds the enabled endpoints, by name, whose run of
// failed attempts began more than @after_us microseconds ago by the
// database clock.
const failingEndpointsSQL = `SELECT id::text FROM webhook_endpoints
WHERE enabled AND failing_since < now() - @after_us::bigint * interval '1 microsecond' ORDER BY name`

// lockFailingSQL locks one of them, @id, and checks again under the lock
// that it is still enabled and failing: a success recorded meanwhile
// (failing_since cleared), an operator or another worker's janitor wins.
const lockFailingSQL = `SELECT name, webhook_time_clamp(failing_since) FROM webhook_endpoints
WHERE id = @id AND enabled AND failing_since < now() - @after_us::bigint * interval '1 microsecond' FOR UPDATE`

// FailingEndpoints returns the ids (uuid text) of the enabled endpoints
// whose every attempt has failed for longer than after, by name
// (failingEndpointsSQL).
func (s *Store) FailingEndpoints(ctx context.Context, after time.Duration) ([]string, error) {
	rows, err := s.pool.Query(ctx, failingEndpointsSQL, pgx.NamedArgs{"after_us": after.Microseconds()})
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// FailingDisabled is an endpoint DisableFailingEndpoint disabled.
type FailingDisabled struct {
	Name string
	// Since is when its run of failed attempts began.
	Since time.Time
	// Moved is how many pending deliveries went to the dead letter.
	Moved int64
}

// DisableFailingEndpoint disables the endpoint id if, under its lock
// (lockFailingSQL), it is still enabled and failing for longer than after,
// with reason(since) as its reason (disableEndpointSQL), in one
// transaction. ok is false when it no longer was: nothing changed.
func (s *Store) DisableFailingEndpoint(ctx context.Context, id string, after time.Duration, reason func(since time.Time) string) (d FailingDisabled, ok bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, lockFailingSQL, pgx.NamedArgs{"id": id, "after_us": after.Microseconds()}).Scan(&d.Name, &d.Since); err != nil {
			return err
		}
		return tx.QueryRow(ctx, disableEndpointSQL, pgx.NamedArgs{"id": id, "reason": reason(d.Since)}).Scan(&d.Moved)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return FailingDisabled{}, false, nil
	} else if err != nil {
		return FailingDisabled{}, false, err
	}
	return d, true, nil
}
