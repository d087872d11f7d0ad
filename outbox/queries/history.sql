-- History's time partitions (migration 013): made ahead, and detached and
-- dropped whole once past the retention (ARCHITECTURE.md, "Where rows
-- live"); the default partitions' rows moved into partitions of their time
-- (migration 026). retention.sql deletes the default partitions' rows past
-- the retention.

-- name: prepare_history
-- Creates the missing partitions of both histories, :'width_s' seconds wide,
-- from one width before now to :'ahead_s' seconds after it by the database
-- clock, and returns how many it made (webhook_history_prepare: one
-- creator at a time, each creation a brief lock of the parent, waited for
-- at most 500 ms; the default partition read before, under its own lock).
-- A range whose rows sit in the default partition is left to it (and to
-- move_history).
SELECT webhook_history_prepare(
    'webhook_outbox_history',
    :'width_s' * interval '1 second',
    now() - :'width_s' * interval '1 second',
    now() + :'ahead_s' * interval '1 second')
  + webhook_history_prepare(
    'webhook_attempts',
    :'width_s' * interval '1 second',
    now() - :'width_s' * interval '1 second',
    now() + :'ahead_s' * interval '1 second') AS made;

-- name: detach_history
-- Detaches the oldest partition of :'parent' whose upper bound is at least
-- :'retention_ms' milliseconds ago by the database clock and returns its
-- name, NULL when there is none (webhook_history_detach: one partition a
-- statement, so that no transaction holds one parent's lock while it waits
-- for another's; the lock waited for at most 500 ms).
SELECT webhook_history_detach(:'parent'::regclass, now() - :'retention_ms' * interval '1 millisecond') AS detached;

-- name: drop_detached
-- Drops every detached history partition, also those a worker detached
-- and did not drop before it stopped, and returns their names: their files
-- go without a lock of the parents.
SELECT webhook_history_drop_detached() AS dropped;

-- name: move_history
-- If it gets the lock :'lock_key', moves at most :'batch' rows of the
-- default partition of :'parent' into the staging table of their range
-- (webhook_history_move, migration 026): the range of its oldest row
-- processed (or attempted) at most :'retention_ms' milliseconds ago (0:
-- any time) and before :'ahead_s' seconds from now, by the database clock,
-- in slots of :'width_s' seconds. Returns whether it got the lock and how
-- many rows it moved (0: none left to move).
WITH lock AS MATERIALIZED (
  SELECT pg_try_advisory_xact_lock(:'lock_key') AS got
)
SELECT l.got,
  CASE WHEN l.got THEN webhook_history_move(
    :'parent'::regclass,
    :'width_s' * interval '1 second',
    CASE WHEN :'retention_ms' > 0 THEN greatest(now() - :'retention_ms' * interval '1 millisecond', '1970-01-01 00:00:00+00')
      ELSE '1970-01-01 00:00:00+00' END,
    now() + :'ahead_s' * interval '1 second',
    :'batch') ELSE 0 END AS moved
FROM lock l;

-- name: attach_history
-- Attaches one staged table of :'parent' as its range's partition, once the
-- default partition holds at most :'batch' rows of that range (moved first,
-- under the locks), and returns its name, NULL when none is ready
-- (webhook_history_attach: nothing read under the parent's lock, waited for
-- at most 500 ms).
SELECT webhook_history_attach(:'parent'::regclass, :'batch') AS attached;
