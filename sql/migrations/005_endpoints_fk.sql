-- 005: validate the outbox's foreign key to webhook_endpoints, added NOT
-- VALID by 004. VALIDATE CONSTRAINT scans the table under a SHARE UPDATE
-- EXCLUSIVE lock, which lets producers insert meanwhile; it runs in a
-- migration of its own so that 004's brief ACCESS EXCLUSIVE lock is not
-- held during the scan.
SET LOCAL lock_timeout = '200ms'; -- see 003: never queue behind a long transaction

ALTER TABLE webhook_outbox VALIDATE CONSTRAINT webhook_outbox_endpoint_id_fkey;

-- `worker dlq … --endpoint NAME` and the per-endpoint dead-letter counts of
-- `worker status`.
CREATE INDEX IF NOT EXISTS webhook_dead_letter_endpoint_id_idx ON webhook_dead_letter (endpoint_id);
