-- Retention's batches on the default history partitions, the only history
-- deleted row by row (history.sql drops the rest whole). Each batch is one
-- statement under the transaction-scoped advisory lock :'lock_key': of
-- several workers, one deletes at a time (ARCHITECTURE.md, "Where rows
-- live"). A default partition has no key: a batch names its rows by ctid.

-- name: delete_processed
-- If it gets the lock :'lock_key', deletes at most :'batch' processed outbox
-- rows of the default history partition processed more than :'retention_ms'
-- milliseconds ago by the database clock, oldest first (its processed_at
-- index); returns whether it got the lock and how many it deleted.
WITH lock AS MATERIALIZED (
  SELECT pg_try_advisory_xact_lock(:'lock_key') AS got
), gone AS (
  DELETE FROM webhook_outbox_history_default
  WHERE (SELECT got FROM lock)
    AND ctid = ANY(ARRAY(
      SELECT ctid
      FROM webhook_outbox_history_default
      WHERE processed AND processed_at < now() - :'retention_ms' * interval '1 millisecond'
      ORDER BY processed_at
      LIMIT :'batch'))
  RETURNING 1
)
SELECT (SELECT got FROM lock) AS got,
  (SELECT count(*) FROM gone) AS deleted;

-- name: delete_attempts
-- delete_processed for the default attempts partition: attempts started
-- more than :'retention_ms' milliseconds ago, oldest first.
WITH lock AS MATERIALIZED (
  SELECT pg_try_advisory_xact_lock(:'lock_key') AS got
), gone AS (
  DELETE FROM webhook_attempts_default
  WHERE (SELECT got FROM lock)
    AND ctid = ANY(ARRAY(
      SELECT ctid
      FROM webhook_attempts_default
      WHERE started_at < now() - :'retention_ms' * interval '1 millisecond'
      ORDER BY started_at
      LIMIT :'batch'))
  RETURNING 1
)
SELECT (SELECT got FROM lock) AS got,
  (SELECT count(*) FROM gone) AS deleted;
