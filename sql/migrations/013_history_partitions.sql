-- 013: history in time partitions. Processed rows used to stay in
-- the table every claim and every producer writes to, and retention deleted
-- them there in batches. Now:
--
--   webhook_outbox                  partitioned by LIST (processed)
--     webhook_outbox_pending        (false): the pending rows, the only
--                                   ones a claim reads; as small as the
--                                   backlog, whatever the history
--     webhook_outbox_history        (true): partitioned again by RANGE
--                                   (processed_at)
--       webhook_outbox_history_pYYYYMMDDtHHMI   one per hour or day,
--                                   created ahead by the worker
--       webhook_outbox_history_default          what no partition covers
--   webhook_attempts                partitioned by RANGE (started_at), the
--                                   same way (webhook_attempts_p…, _default)
--
-- Marking a row processed (UPDATE … SET processed = true) moves it from
-- webhook_outbox_pending to its history partition in the same statement.
-- Every statement on pending rows says NOT processed, which the planner
-- prunes to webhook_outbox_pending at plan time. Retention drops a whole
-- partition once its newest possible row is past WEBHOOK_RETENTION: no
-- DELETE, no dead tuples, no vacuum on the hot table.
--
-- Existing rows are all kept. The old tables become history partitions
-- (webhook_outbox_history_legacy, webhook_attempts_legacy) covering
-- everything before the next hour, after the old outbox's pending rows have
-- been moved to webhook_outbox_pending; they are dropped whole when that
-- hour is past retention. An empty old table is dropped at once. The
-- migration takes the outbox's lock for about a second per million rows
-- (one read to check the partition bound): run it at a quiet moment.
--
-- The pending partition keeps the indexes of 012 under their names, the
-- primary key, the foreign key to webhook_endpoints (ON DELETE CASCADE:
-- removing an endpoint removes its pending rows; its history stays until
-- retention drops it) and the headers check of 007 (NOT VALID, as there).
-- History partitions have fillfactor 100: their rows are never updated.
-- Grants on the old tables are granted again on the new ones.
SET LOCAL lock_timeout = '200ms'; -- see 003: never queue behind a long transaction

LOCK TABLE webhook_outbox, webhook_attempts IN ACCESS EXCLUSIVE MODE;

-- webhook_partition_bounds lists the range partitions of p_parent with
-- their bounds (MINVALUE as -infinity, MAXVALUE as infinity); the default
-- partition is not listed.
CREATE OR REPLACE FUNCTION webhook_partition_bounds(p_parent regclass)
RETURNS TABLE (part regclass, lo timestamptz, hi timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT c.oid::regclass,
           CASE WHEN m[1] = 'MINVALUE' THEN '-infinity' ELSE btrim(m[1], '''')::timestamptz END,
           CASE WHEN m[2] = 'MAXVALUE' THEN 'infinity' ELSE btrim(m[2], '''')::timestamptz END
      FROM pg_inherits i
      JOIN pg_class c ON c.oid = i.inhrelid
      CROSS JOIN LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid), '^FOR VALUES FROM \((.+)\) TO \((.+)\)$') AS m
     WHERE i.inhparent = p_parent AND m IS NOT NULL
$$;

-- webhook_history_prepare creates the partitions of p_parent (partitioned
-- by a timestamptz range) that cover [p_from, p_to): one per slot of
-- p_width aligned on the Unix epoch (whole UTC hours and days), less what
-- existing partitions already cover (a slot partly covered gets a
-- partition for each gap), so that workers with different widths, or the
-- legacy partition's bound, never make two partitions overlap. It returns
-- how many it created. One creator at a time (an advisory lock); each
-- creation holds p_parent's lock for a moment and waits for it at most
-- 500 ms (the statement then fails, and the next round tries again); a gap
-- whose range has rows in the default partition is left to it (and to the
-- batch deletes of retention) rather than failing the rest.
CREATE OR REPLACE FUNCTION webhook_history_prepare(p_parent regclass, p_width interval, p_from timestamptz, p_to timestamptz)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    w double precision := extract(epoch FROM p_width);
    s timestamptz;
    e timestamptz;
    cur timestamptz;
    b record;
    made integer := 0;
BEGIN
    IF w < 60 THEN
        RAISE EXCEPTION 'webhook_history_prepare: width % is under a minute', p_width USING ERRCODE = '22023';
    END IF;
    PERFORM set_config('lock_timeout', '500ms', true);
    PERFORM pg_advisory_xact_lock(hashtext('fluxora_history'), 1);
    s := to_timestamp(floor(extract(epoch FROM p_from) / w) * w);
    WHILE s < p_to LOOP
        e := s + p_width;
        cur := s;
        FOR b IN SELECT lo, hi FROM webhook_partition_bounds(p_parent) WHERE lo < e AND hi > s ORDER BY lo LOOP
            IF b.lo > cur THEN
                made := made + webhook_history_create(p_parent, cur, b.lo);
            END IF;
            cur := greatest(cur, b.hi);
        END LOOP;
        IF cur < e THEN
            made := made + webhook_history_create(p_parent, cur, e);
        END IF;
        s := e;
    END LOOP;
    RETURN made;
END;
$$;

-- webhook_history_create creates one partition of p_parent for [p_lo, p_hi);
-- 0 when the default partition holds rows of that range (SQLSTATE 23514),
-- 1 when made. CREATE TABLE … PARTITION OF, not ATTACH: it takes p_parent's
-- ACCESS EXCLUSIVE lock for the moment it takes (ahead of need, once a slot),
-- where ATTACH's SHARE UPDATE EXCLUSIVE lets a statement plan meanwhile
-- against the partitions without the new one and keep that plan cached
-- (seen: a prepared count(*) missing the rows of the new partition).
CREATE OR REPLACE FUNCTION webhook_history_create(p_parent regclass, p_lo timestamptz, p_hi timestamptz)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    name text := format('%s_p%s', (SELECT relname FROM pg_class WHERE oid = p_parent),
                        to_char(p_lo AT TIME ZONE 'UTC', 'YYYYMMDD"t"HH24MI'));
BEGIN
    EXECUTE format('CREATE TABLE %I PARTITION OF %s FOR VALUES FROM (%L) TO (%L) WITH (fillfactor = 100)', name, p_parent, p_lo, p_hi);
    RETURN 1;
EXCEPTION WHEN check_violation THEN
    RETURN 0;
END;
$$;

-- webhook_history_detach detaches the oldest partition of p_parent whose
-- every row is older than p_before (its upper bound is at or before it)
-- and returns its name, or NULL when there is none; the table is then
-- dropped by webhook_history_drop_detached, in a statement of its own, so
-- that removing its files holds no lock of the parent. One partition a
-- call, each call its own transaction: a transaction that had detached one
-- would hold that parent's lock while it waited for the next (a record
-- statement holding webhook_attempts and waiting for
-- webhook_outbox_history made a deadlock of it). It first locks the
-- partition itself, waiting up to 5 s: nobody writes to an old partition,
-- but a vacuum of it (after a bulk load, or against wraparound) holds it,
-- and autovacuum gives way only after deadlock_timeout (1 s by default);
-- writers never queue behind that wait. Then the detach takes the parent's
-- ACCESS EXCLUSIVE lock for the moment a catalog change takes, and that
-- wait is cut at 500 ms (the statement then fails, and retention tries
-- again soon), so that writers never queue long behind it.
CREATE OR REPLACE FUNCTION webhook_history_detach(p_parent regclass, p_before timestamptz)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    b record;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('fluxora_history'), 1);
    SELECT part, part::text AS name INTO b FROM webhook_partition_bounds(p_parent) WHERE hi <= p_before ORDER BY hi LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('lock_timeout', '5s', true);
    EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', b.part);
    PERFORM set_config('lock_timeout', '500ms', true);
    EXECUTE format('ALTER TABLE %s DETACH PARTITION %s', p_parent, b.part);
    RETURN b.name;
END;
$$;

-- webhook_history_drop_detached drops every table that was a history
-- partition and is one no more (detached by webhook_history_detach, also
-- by a worker that stopped before it dropped it: named as history
-- partitions are, and no partition) and returns their names.
CREATE OR REPLACE FUNCTION webhook_history_drop_detached()
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    t record;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('fluxora_history'), 1);
    FOR t IN SELECT c.oid::regclass AS rel, c.oid::regclass::text AS name
               FROM pg_class c
              WHERE c.relkind = 'r' AND NOT c.relispartition
                AND c.relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = 'webhook_outbox'::regclass)
                AND c.relname ~ '^(webhook_outbox_history|webhook_attempts)_(p[0-9]{8}t[0-9]{4}|legacy)$' LOOP
        EXECUTE format('DROP TABLE %s', t.rel);
        RETURN NEXT t.name;
    END LOOP;
END;
$$;

-- webhook_copy_grants grants on p_to what was granted on p_from, to the
-- same roles (its owner's own rights aside).
CREATE OR REPLACE FUNCTION webhook_copy_grants(p_from regclass, p_to regclass)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    g record;
BEGIN
    FOR g IN SELECT a.privilege_type, a.grantee
               FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
              WHERE c.oid = p_from AND a.grantee <> c.relowner LOOP
        EXECUTE format('GRANT %s ON %s TO %s', g.privilege_type, p_to,
                       CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(g.grantee)) END);
    END LOOP;
END;
$$;

-- The outbox.
ALTER TABLE webhook_outbox RENAME TO webhook_outbox_history_legacy;
ALTER TABLE webhook_outbox_history_legacy RENAME CONSTRAINT webhook_outbox_pkey TO webhook_outbox_history_legacy_pkey;
ALTER INDEX webhook_outbox_processed_at_idx RENAME TO webhook_outbox_history_legacy_processed_at_idx;
-- The NOTIFY trigger moves to the new table as the deployment has it (or
-- stays absent where it was dropped), after the partitions exist.
CREATE TEMPORARY TABLE webhook_013_trigger ON COMMIT DROP AS
    SELECT regexp_replace(pg_get_triggerdef(t.oid), ' ON (\S+\.)?webhook_outbox_history_legacy ', ' ON \1webhook_outbox ') AS def
      FROM pg_trigger t
     WHERE t.tgrelid = 'webhook_outbox_history_legacy'::regclass AND t.tgname = 'webhook_outbox_notify';
DROP TRIGGER IF EXISTS webhook_outbox_notify ON webhook_outbox_history_legacy;

CREATE TABLE webhook_outbox (LIKE webhook_outbox_history_legacy
    INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMMENTS)
    PARTITION BY LIST (processed);
ALTER TABLE webhook_outbox DROP CONSTRAINT IF EXISTS webhook_outbox_headers_valid;
ALTER SEQUENCE webhook_outbox_id_seq OWNED BY webhook_outbox.id;
SELECT webhook_copy_grants('webhook_outbox_history_legacy', 'webhook_outbox');

CREATE TABLE webhook_outbox_pending PARTITION OF webhook_outbox FOR VALUES IN (false) WITH (fillfactor = 70);
INSERT INTO webhook_outbox_pending SELECT * FROM webhook_outbox_history_legacy WHERE NOT processed;
ALTER TABLE webhook_outbox_pending ADD CONSTRAINT webhook_outbox_pkey PRIMARY KEY (id);
DROP INDEX webhook_outbox_queue_idx, webhook_outbox_events_idx, webhook_outbox_env_idx;
CREATE INDEX webhook_outbox_queue_idx ON webhook_outbox_pending (endpoint_id, created_at, id)
    WHERE NOT processed AND endpoint_id IS NOT NULL;
CREATE INDEX webhook_outbox_events_idx ON webhook_outbox_pending (created_at, id)
    WHERE NOT processed AND endpoint_id IS NULL AND fanout IS NULL;
CREATE INDEX webhook_outbox_env_idx ON webhook_outbox_pending (created_at, id)
    WHERE NOT processed AND endpoint_id IS NULL AND fanout IS NOT NULL;
ALTER TABLE webhook_outbox_history_legacy DROP CONSTRAINT IF EXISTS webhook_outbox_endpoint_id_fkey;
ALTER TABLE webhook_outbox_pending ADD CONSTRAINT webhook_outbox_endpoint_id_fkey
    FOREIGN KEY (endpoint_id) REFERENCES webhook_endpoints (id) ON DELETE CASCADE NOT VALID;
ALTER TABLE webhook_outbox_pending VALIDATE CONSTRAINT webhook_outbox_endpoint_id_fkey;
ALTER TABLE webhook_outbox_pending ADD CONSTRAINT webhook_outbox_headers_valid
    CHECK (headers IS NULL OR webhook_headers_check(headers)) NOT VALID;

CREATE TABLE webhook_outbox_history PARTITION OF webhook_outbox FOR VALUES IN (true) PARTITION BY RANGE (processed_at);
-- The same definition as the old webhook_outbox_processed_at_idx, so that
-- the legacy partition's index is attached, not built again.
CREATE INDEX webhook_outbox_history_processed_at_idx ON webhook_outbox_history (processed_at) WHERE processed;
CREATE TABLE webhook_outbox_history_default PARTITION OF webhook_outbox_history DEFAULT WITH (fillfactor = 100);

DELETE FROM webhook_outbox_history_legacy WHERE NOT processed;

-- The attempts.
ALTER TABLE webhook_attempts RENAME TO webhook_attempts_legacy;
ALTER TABLE webhook_attempts_legacy RENAME CONSTRAINT webhook_attempts_pkey TO webhook_attempts_legacy_pkey;
ALTER INDEX webhook_attempts_delivery_id_idx RENAME TO webhook_attempts_legacy_delivery_id_idx;
CREATE TABLE webhook_attempts (LIKE webhook_attempts_legacy
    INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE INCLUDING COMMENTS)
    PARTITION BY RANGE (started_at);
ALTER SEQUENCE webhook_attempts_id_seq OWNED BY webhook_attempts.id;
SELECT webhook_copy_grants('webhook_attempts_legacy', 'webhook_attempts');
CREATE INDEX webhook_attempts_delivery_id_idx ON webhook_attempts (delivery_id);
CREATE TABLE webhook_attempts_default PARTITION OF webhook_attempts DEFAULT WITH (fillfactor = 100);

-- The old tables become legacy partitions up to the next hour, or go. A
-- row without a time, or with one from the next hour on (a clock far
-- off, a time clamped by 009), would hold that bound open: it moves, as it
-- is, to the default partition.
DO $$
DECLARE
    bound timestamptz := date_trunc('hour', now()) + interval '1 hour';
    t record;
    has_rows boolean;
BEGIN
    FOR t IN SELECT * FROM (VALUES ('webhook_outbox_history_legacy', 'webhook_outbox_history', 'webhook_outbox_history_default', 'processed_at'),
                                   ('webhook_attempts_legacy', 'webhook_attempts', 'webhook_attempts_default', 'started_at'))
                        AS v(legacy, parent, dflt, col) LOOP
        EXECUTE format('WITH moved AS (DELETE FROM %I WHERE %I IS NULL OR %I >= %L RETURNING *) INSERT INTO %I SELECT * FROM moved',
                       t.legacy, t.col, t.col, bound, t.dflt);
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I)', t.legacy) INTO has_rows;
        IF has_rows THEN
            EXECUTE format('ALTER TABLE %I SET (fillfactor = 100)', t.legacy);
            EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO (%L)', t.parent, t.legacy, bound);
        ELSE
            EXECUTE format('DROP TABLE %I', t.legacy);
        END IF;
    END LOOP;
END;
$$;

DO $$
DECLARE
    def text;
BEGIN
    FOR def IN SELECT t.def FROM webhook_013_trigger t LOOP
        EXECUTE def;
    END LOOP;
END;
$$;
