package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// History: processed outbox rows and attempts live in time partitions
// (migration 013): webhook_outbox_history by processed_at and
// webhook_attempts by started_at, each with a default partition for what
// no time partition covers. The worker creates the partitions ahead
// (PrepareHistory) and retention drops them whole (DropHistoryBefore); the
// default partitions alone are emptied row by row
// (DeleteProcessedBefore, DeleteAttemptsBefore), and hold rows only when
// no partition was ready (a test's old rows, a clock far off).

// prepareHistorySQL creates the partitions of both histories of width
// @width_s seconds covering the slot before now and @ahead_s seconds
// after it, by the database clock, less what exists (the SQL function
// webhook_history_prepare: one creator at a time, each creation a brief
// lock on the history's parent, waited for at most 500 ms); it
// returns how many it made. A range whose rows already sit in the default
// partition is left to it.
const prepareHistorySQL = `SELECT
  webhook_history_prepare('webhook_outbox_history', @width_s * interval '1 second',
    now() - @width_s * interval '1 second', now() + @ahead_s * interval '1 second')
  + webhook_history_prepare('webhook_attempts', @width_s * interval '1 second',
    now() - @width_s * interval '1 second', now() + @ahead_s * interval '1 second')`

// dropHistorySQL drops every partition of both histories whose upper
// bound is at least @retention_ms milliseconds ago by the database clock,
// oldest first (webhook_history_drop: each drop holds its parent's lock for
// a moment, and waits at most 500 ms for it), and returns their names.
const dropHistorySQL = `SELECT d.name FROM webhook_history_drop('webhook_outbox_history', now() - @retention_ms * interval '1 millisecond') AS d(name)
UNION ALL
SELECT d.name FROM webhook_history_drop('webhook_attempts', now() - @retention_ms * interval '1 millisecond') AS d(name)`

// PrepareHistory creates the missing time partitions of width width
// (seconds, at least a minute) from one width before now to ahead after
// it, and returns how many it made.
func (s *Store) PrepareHistory(ctx context.Context, width, ahead time.Duration) (made int, err error) {
	args := pgx.NamedArgs{"width_s": int64(width / time.Second), "ahead_s": int64(ahead / time.Second)}
	if err := s.pool.QueryRow(ctx, prepareHistorySQL, args).Scan(&made); err != nil {
		return 0, fmt.Errorf("prepare history partitions: %w", err)
	}
	return made, nil
}

// DropHistoryBefore drops the time partitions whose every row was
// processed (or attempted) more than retention ago and returns their
// names.
func (s *Store) DropHistoryBefore(ctx context.Context, retention time.Duration) ([]string, error) {
	rows, err := s.pool.Query(ctx, dropHistorySQL, pgx.NamedArgs{"retention_ms": retention.Milliseconds()})
	if err != nil {
		return nil, fmt.Errorf("drop history partitions: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("drop history partitions: %w", err)
	}
	return names, nil
}
