-- 010: validate the time-range constraints 009 added NOT VALID. First
-- webhook_fix_times deals with any row out of range that a transaction
-- begun before 009 wrote (every later write is checked); then VALIDATE
-- CONSTRAINT scans each table under a SHARE UPDATE EXCLUSIVE lock, which
-- lets producers insert meanwhile. A migration of its own, so that 009's
-- brief ACCESS EXCLUSIVE locks are not held during the scans (as 005).
SET LOCAL lock_timeout = '200ms'; -- see 003: never queue behind a long transaction

SELECT webhook_fix_times();

ALTER TABLE webhook_outbox VALIDATE CONSTRAINT webhook_outbox_created_at_range;
ALTER TABLE webhook_outbox VALIDATE CONSTRAINT webhook_outbox_processed_at_range;
ALTER TABLE webhook_outbox VALIDATE CONSTRAINT webhook_outbox_locked_until_range;
ALTER TABLE webhook_dead_letter VALIDATE CONSTRAINT webhook_dead_letter_died_at_range;
ALTER TABLE webhook_attempts VALIDATE CONSTRAINT webhook_attempts_started_at_range;
ALTER TABLE webhook_endpoints VALIDATE CONSTRAINT webhook_endpoints_created_at_range;
ALTER TABLE webhook_endpoints VALIDATE CONSTRAINT webhook_endpoints_updated_at_range;
ALTER TABLE webhook_endpoints VALIDATE CONSTRAINT webhook_endpoints_failing_since_range;
ALTER TABLE webhook_endpoints VALIDATE CONSTRAINT webhook_endpoints_last_error_at_range;
ALTER TABLE webhook_endpoints VALIDATE CONSTRAINT webhook_endpoints_disabled_at_range;
ALTER TABLE webhook_endpoints VALIDATE CONSTRAINT webhook_endpoints_secret_previous_until_range;
