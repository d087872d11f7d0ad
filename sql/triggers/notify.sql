-- The insert trigger that wakes workers: NOTIFY webhook_outbox.
--
-- Why it is shaped like this: a NOTIFY makes the committing transaction take a
-- database-wide lock from pre-commit until after its WAL flush, so a plain
-- per-row pg_notify serialises every producer and loses group commit
-- (measured: 5,800 -> 570-2,100 commits/s at 8 producers). So:
--   * It is a DEFERRED constraint trigger: it runs at commit time, when the row
--     is about to become visible, not when it is inserted.
--   * Its WHEN clause queues it only for rows that are due when inserted and
--     not leased: future rows (scheduled retries, which the worker inserts
--     itself) cost nothing here and are found by the worker's own timer or
--     its poll, and deliveries a claim fans out leased to itself wake no one.
--   * At most one notifier is in flight: a transaction notifies only if it can
--     take the transaction-scoped advisory lock (hashtext('fluxora_webhook'),
--     1). A producer that cannot take it skips its NOTIFY; the worker woken by
--     the notifier re-checks the table after each non-empty claim and again a
--     few milliseconds after it drains, so the skipped row is picked up
--     without waiting for the poll.
--   * A busy worker holds that lock shared (listener.Hush) while it is
--     claiming continuously, so under a steady stream producers do not
--     notify at all; it releases the lock as soon as a claim comes back
--     empty, then re-checks as above.
--   * The lock is re-entrant and NOTIFY folds duplicates within a
--     transaction, so a multi-row insert notifies once.
-- The payload is empty: NOTIFY is a hint, never the data.
CREATE OR REPLACE FUNCTION webhook_outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF pg_try_advisory_xact_lock(hashtext('fluxora_webhook'), 1) THEN
        NOTIFY webhook_outbox;
    END IF;
    RETURN NULL;
END;
$$;

DROP TRIGGER IF EXISTS webhook_outbox_notify ON webhook_outbox;
CREATE CONSTRAINT TRIGGER webhook_outbox_notify
    AFTER INSERT ON webhook_outbox
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW
    WHEN (NOT NEW.processed AND NEW.created_at <= clock_timestamp() AND NEW.locked_until IS NULL)
    EXECUTE FUNCTION webhook_outbox_notify();
