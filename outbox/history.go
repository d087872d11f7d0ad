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
// them whole, MoveHistory and AttachHistory move the default partitions'
// rows into partitions of their time; retention.go deletes the default
// partitions' rows past the retention.

var (
	prepareHistorySQL = rawStatement("prepare_history")
	detachHistorySQL  = rawStatement("detach_history")
	dropDetachedSQL   = rawStatement("drop_detached")
	moveHistorySQL    = rawStatement("move_history")
	attachHistorySQL  = rawStatement("attach_history")
)

// HistoryParents are the partitioned tables of history, by time: the
// processed outbox rows and the attempts.
var HistoryParents = [...]string{"webhook_outbox_history", "webhook_attempts"}

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
	for _, parent := range HistoryParents {
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

// HistoryMove is one batch of MoveHistory.
type HistoryMove struct {
	// Parent is one of HistoryParents.
	Parent string
	// Width is the width of the partitions a range is made for, as
	// PrepareHistory's.
	Width time.Duration
	// Retention: rows older are left (retention deletes them); 0 moves
	// rows of any age.
	Retention time.Duration
	// Ahead: rows later than this far from now are left, until their time
	// nears.
	Ahead time.Duration
	// Batch is the most rows a statement moves.
	Batch int
	// LockKey is the advisory lock of one mover across workers.
	LockKey int64
}

// movedRow is move_history's result.
type movedRow struct {
	Got   bool  `db:"got"`
	Moved int64 `db:"moved"`
}

// MoveHistory moves one batch of rows of m.Parent's default partition into
// the staging table of their range (move_history): n is 0 when none is
// left to move; got is false, and n 0, when another session holds the
// lock. A staged range becomes a partition with AttachHistory once the
// default holds none of its rows.
func (s *Store) MoveHistory(ctx context.Context, m HistoryMove) (n int64, got bool, err error) {
	r, err := queryOne[movedRow](ctx, s.pool, moveHistorySQL, pgx.NamedArgs{
		"parent": m.Parent, "width_s": int64(m.Width / time.Second), "retention_ms": m.Retention.Milliseconds(),
		"ahead_s": int64(m.Ahead / time.Second), "batch": m.Batch, "lock_key": m.LockKey})
	if err != nil {
		return 0, false, fmt.Errorf("move history of %s: %w", m.Parent, err)
	}
	return r.Moved, r.Got, nil
}

// attachedRow is attach_history's result: nil when nothing was attached.
type attachedRow struct {
	Attached *string `db:"attached"`
}

// AttachHistory attaches every staged range of parent whose rows have left
// the default partition, but for at most batch (moved first), as its
// partition, one statement each, and returns their names.
func (s *Store) AttachHistory(ctx context.Context, parent string, batch int) ([]string, error) {
	var names []string
	for {
		r, err := queryOne[attachedRow](ctx, s.pool, attachHistorySQL, pgx.NamedArgs{"parent": parent, "batch": batch})
		if err != nil {
			return names, fmt.Errorf("attach history of %s: %w", parent, err)
		}
		if r.Attached == nil {
			return names, nil
		}
		names = append(names, *r.Attached)
	}
}
