package outbox

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// The retention's batches, for the rows of the default partitions
// (history.go: every other history row goes with its whole partition).
// Each is one statement: it takes the transaction-scoped advisory lock
// @lock_key (pg_try_advisory_xact_lock, which works through PgBouncer in
// transaction mode too) and, only when it got it, deletes at most @batch
// rows older than @retention_ms milliseconds by the database clock; it
// returns whether it got the lock and how many rows it deleted. One
// statement, so that no session of the worker ever sits idle in a
// transaction (which would hold vacuum back), and the lock ends with it:
// of several workers, one deletes at a time. The default partitions have
// no key to find a row by: a batch names its rows by ctid.

// deleteProcessedSQL deletes processed outbox rows of the default history
// partition, the oldest processed first (its processed_at index).
const deleteProcessedSQL = `WITH lock AS MATERIALIZED (SELECT pg_try_advisory_xact_lock(@lock_key) AS got),
gone AS (DELETE FROM webhook_outbox_history_default WHERE (SELECT got FROM lock) AND ctid = ANY(ARRAY(
  SELECT ctid FROM webhook_outbox_history_default WHERE processed AND processed_at < now() - @retention_ms * interval '1 millisecond'
  ORDER BY processed_at LIMIT @batch)) RETURNING 1)
SELECT (SELECT got FROM lock), (SELECT count(*) FROM gone)`

// deleteAttemptsSQL deletes attempt history of the default attempts
// partition, oldest first.
const deleteAttemptsSQL = `WITH lock AS MATERIALIZED (SELECT pg_try_advisory_xact_lock(@lock_key) AS got),
gone AS (DELETE FROM webhook_attempts_default WHERE (SELECT got FROM lock) AND ctid = ANY(ARRAY(
  SELECT ctid FROM webhook_attempts_default WHERE started_at < now() - @retention_ms * interval '1 millisecond'
  ORDER BY started_at LIMIT @batch)) RETURNING 1)
SELECT (SELECT got FROM lock), (SELECT count(*) FROM gone)`

// DeleteProcessedBefore deletes one batch of at most batch rows of the
// default history partition processed more than retention ago
// (deleteProcessedSQL, in milliseconds) under the advisory lock lockKey;
// got is false, and n 0, when another session holds it.
func (s *Store) DeleteProcessedBefore(ctx context.Context, retention time.Duration, batch int, lockKey int64) (n int64, got bool, err error) {
	return s.deleteBatch(ctx, deleteProcessedSQL, retention, batch, lockKey)
}

// DeleteAttemptsBefore is DeleteProcessedBefore for the default attempts
// partition: attempts started more than retention ago (deleteAttemptsSQL).
func (s *Store) DeleteAttemptsBefore(ctx context.Context, retention time.Duration, batch int, lockKey int64) (n int64, got bool, err error) {
	return s.deleteBatch(ctx, deleteAttemptsSQL, retention, batch, lockKey)
}

func (s *Store) deleteBatch(ctx context.Context, sql string, retention time.Duration, batch int, lockKey int64) (n int64, got bool, err error) {
	args := pgx.NamedArgs{"retention_ms": retention.Milliseconds(), "batch": batch, "lock_key": lockKey}
	err = s.pool.QueryRow(ctx, sql, args).Scan(&got, &n)
	return n, got, err
}
