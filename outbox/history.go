package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// History's time partitions (queries/history.sql; ARCHITECTURE.md, "Where
// rows live"): PrepareHistory makes them ahead, DropHistoryBefore drops
// them whole; retention.go empties the default partitions.

var (
	prepareHistorySQL = rawStatement("prepare_history")
	detachHistorySQL  = rawStatement("detach_history")
	dropDetachedSQL   = rawStatement("drop_detached")
)

// historyParents are the partitioned tables of history, by time.
var historyParents = [...]string{"webhook_outbox_history", "webhook_attempts"}

// preparedRow is prepare_history's result.
type preparedRow struct {
	Made int `db:"made"`
}

// detachedRow is detach_history's result: nil when nothing was detached.
type detachedRow struct {
	Detached *string `db:"detached"`
}

// droppedRow is one row of drop_detached.
type droppedRow struct {
	Dropped string `db:"dropped"`
}

// PrepareHistory creates the missing time partitions of width width
// (seconds, at least a minute) from one width before now to ahead after
// it, and returns how many it made.
func (s *Store) PrepareHistory(ctx context.Context, width, ahead time.Duration) (made int, err error) {
	args := pgx.NamedArgs{"width_s": int64(width / time.Second), "ahead_s": int64(ahead / time.Second)}
	rows, err := s.pool.Query(ctx, prepareHistorySQL, args)
	if err != nil {
		return 0, fmt.Errorf("prepare history partitions: %w", err)
	}
	r, err := pgx.CollectOneRow(rows, pgx.RowToStructByName[preparedRow])
	if err != nil {
		return 0, fmt.Errorf("prepare history partitions: %w", err)
	}
	return r.Made, nil
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
	dropped, qerr := pgx.CollectRows(rows, pgx.RowToStructByName[droppedRow])
	if qerr != nil {
		return nil, errors.Join(err, fmt.Errorf("drop detached history partitions: %w", qerr))
	}
	names := make([]string, len(dropped))
	for i, d := range dropped {
		names[i] = d.Dropped
	}
	return names, err
}

// detachAll detaches the partitions of parent past retention.
func (s *Store) detachAll(ctx context.Context, parent string, retention time.Duration) error {
	for {
		rows, err := s.pool.Query(ctx, detachHistorySQL, pgx.NamedArgs{"parent": parent, "retention_ms": retention.Milliseconds()})
		if err != nil {
			return fmt.Errorf("detach history partitions of %s: %w", parent, err)
		}
		r, err := pgx.CollectOneRow(rows, pgx.RowToStructByName[detachedRow])
		if err != nil {
			return fmt.Errorf("detach history partitions of %s: %w", parent, err)
		}
		if r.Detached == nil {
			return nil
		}
	}
}
