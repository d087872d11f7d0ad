package outbox

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Retention's batches on the default history partitions
// (queries/retention.sql): each one statement under an advisory lock, so
// that no session sits idle in a transaction and of several workers one
// deletes at a time (ARCHITECTURE.md, "Where rows live").
var (
	deleteProcessedSQL = rawStatement("delete_processed")
	deleteAttemptsSQL  = rawStatement("delete_attempts")
)

// batchRow is the result of a retention batch.
type batchRow struct {
	Got     bool  `db:"got"`
	Deleted int64 `db:"deleted"`
}

// DeleteProcessedBefore deletes one batch of at most batch rows of the
// default history partition processed more than retention ago
// (delete_processed, in milliseconds) under the advisory lock lockKey;
// got is false, and n 0, when another session holds it.
func (s *Store) DeleteProcessedBefore(ctx context.Context, retention time.Duration, batch int, lockKey int64) (n int64, got bool, err error) {
	return s.deleteBatch(ctx, deleteProcessedSQL, retention, batch, lockKey)
}

// DeleteAttemptsBefore is DeleteProcessedBefore for the default attempts
// partition: attempts started more than retention ago (delete_attempts).
func (s *Store) DeleteAttemptsBefore(ctx context.Context, retention time.Duration, batch int, lockKey int64) (n int64, got bool, err error) {
	return s.deleteBatch(ctx, deleteAttemptsSQL, retention, batch, lockKey)
}

// deleteBatch runs one of the batches, sql.
func (s *Store) deleteBatch(ctx context.Context, sql string, retention time.Duration, batch int, lockKey int64) (n int64, got bool, err error) {
	args := pgx.NamedArgs{"retention_ms": retention.Milliseconds(), "batch": batch, "lock_key": lockKey}
	rows, err := s.pool.Query(ctx, sql, args)
	if err != nil {
		return 0, false, err
	}
	r, err := pgx.CollectOneRow(rows, pgx.RowToStructByName[batchRow])
	return r.Deleted, r.Got, err
}
