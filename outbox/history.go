package outbox

import (
	"context"
	"errors"
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

// detachHistorySQL detaches the oldest partition of @parent (one of
// historyParents) whose upper bound is at least @retention_ms milliseconds
// ago by the database clock, and returns its name, NULL when there is none
// (webhook_history_detach: one partition a statement, so that no
// transaction holds one parent's lock while it waits for another's; the
// parent's lock held for a catalog change, and waited for at most 500 ms).
const detachHistorySQL = `SELECT webhook_history_detach(@parent::regclass, now() - @retention_ms * interval '1 millisecond')`

// dropDetachedSQL drops every detached history partition, those a worker
// detached and did not drop before it stopped too, and returns their
// names: their files go without a lock of the history's parents.
const dropDetachedSQL = `SELECT webhook_history_drop_detached()`

// historyParents are the partitioned tables of history, by time.
var historyParents = [...]string{"webhook_outbox_history", "webhook_attempts"}

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

// DropHistoryBefore detaches the time partitions whose every row was
// processed (or attempted) more than retention ago, one statement each,
// then drops them, and returns the names of the tables dropped.
func (s *Store) DropHistoryBefore(ctx context.Context, retention time.Duration) ([]string, error) {
	var err error
	for _, parent := range historyParents {
		if err = s.detachAll(ctx, parent, retention); err != nil {
			break
		}
	}
	// What was detached goes, also when a later detach failed.
	rows, qerr := s.pool.Query(ctx, dropDetachedSQL)
	if qerr != nil {
		return nil, errors.Join(err, fmt.Errorf("drop detached history partitions: %w", qerr))
	}
	names, qerr := pgx.CollectRows(rows, pgx.RowTo[string])
	if qerr != nil {
		return names, errors.Join(err, fmt.Errorf("drop detached history partitions: %w", qerr))
	}
	return names, err
}

// detachAll detaches the partitions of parent past retention.
func (s *Store) detachAll(ctx context.Context, parent string, retention time.Duration) error {
	for {
		var name *string
		err := s.pool.QueryRow(ctx, detachHistorySQL, pgx.NamedArgs{"parent": parent, "retention_ms": retention.Milliseconds()}).Scan(&name)
		if err != nil {
			return fmt.Errorf("detach history partitions of %s: %w", parent, err)
		}
		if name == nil {
			return nil
		}
	}
}
