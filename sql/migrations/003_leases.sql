-- 003: leases. A worker holds a claimed row by a lease, not by an open
-- transaction: the claim sets locked_until (by the database clock) and a
-- fresh lease_token, and commits at once. The outcome is recorded only where
-- the token still matches (the fence), so a worker frozen past its lease
-- cannot overwrite the work of the worker that took the row over. A row whose
-- lease has expired is claimable again; reclaims counts how often that
-- happened to it (a worker died, froze or lost its database connection).
--
-- Safe on a running deployment: nullable columns and a constant default are
-- catalog-only changes (no table rewrite, PostgreSQL 11+). The ALTER still
-- needs a brief ACCESS EXCLUSIVE lock, and while it queues behind a long
-- transaction (a worker of the previous version holds its claim transaction
-- across HTTP requests) it would block every producer's INSERT: lock_timeout
-- bounds that wait, and `worker migrate` tries again (sql/schema.go).
SET LOCAL lock_timeout = '200ms';

ALTER TABLE webhook_outbox
    ADD COLUMN IF NOT EXISTS locked_until timestamptz,
    ADD COLUMN IF NOT EXISTS lease_token  uuid,
    ADD COLUMN IF NOT EXISTS reclaims     integer NOT NULL DEFAULT 0;

-- A claim rewrites its row (locked_until, lease_token), and so does the
-- outcome. Room on each page lets the claim's new row version stay on the
-- same page as a HOT update, which adds no index entry; catalog-only, it
-- applies to pages written from now on.
ALTER TABLE webhook_outbox SET (fillfactor = 70);
