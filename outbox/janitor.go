package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// The janitor's statements (queries/janitor.sql).
var (
	failingEndpointsSQL = rawStatement("failing_endpoints")
	lockFailingSQL      = rawStatement("lock_failing")
)

// failingRow is one row of failing_endpoints.
type failingRow struct {
	ID string `db:"id"`
}

// lockedFailingRow is lock_failing's result.
type lockedFailingRow struct {
	Name  string    `db:"name"`
	Since time.Time `db:"since"`
}

// FailingEndpoints returns the ids (uuid text) of the enabled endpoints
// whose every attempt has failed for longer than after, by name
// (failing_endpoints).
func (s *Store) FailingEndpoints(ctx context.Context, after time.Duration) ([]string, error) {
	rows, err := s.pool.Query(ctx, failingEndpointsSQL, pgx.NamedArgs{"after_us": after.Microseconds()})
	if err != nil {
		return nil, err
	}
	failing, err := pgx.CollectRows(rows, pgx.RowToStructByName[failingRow])
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(failing))
	for i, f := range failing {
		ids[i] = f.ID
	}
	return ids, nil
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
// (lock_failing), it is still enabled and failing for longer than after,
// with reason(since) as its reason (disableEndpointSQL), in one
// transaction. ok is false when it no longer was: nothing changed.
func (s *Store) DisableFailingEndpoint(ctx context.Context, id string, after time.Duration, reason func(since time.Time) string) (d FailingDisabled, ok bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, lockFailingSQL, pgx.NamedArgs{"id": id, "after_us": after.Microseconds()})
		if err != nil {
			return err
		}
		locked, err := pgx.CollectOneRow(rows, pgx.RowToStructByName[lockedFailingRow])
		if err != nil {
			return err
		}
		d.Name, d.Since = locked.Name, locked.Since
		if err := s.setConsoleURL(ctx, tx); err != nil {
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
