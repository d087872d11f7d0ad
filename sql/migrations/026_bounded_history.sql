-- 026: history and lanes that stay bounded for months (ARCHITECTURE.md,
-- "Where rows live").
--
-- The default partitions. A row written already processed with a time no
-- partition covers (a backfill, an import by SQL, a clock far off) lands in
-- webhook_outbox_history_default (or webhook_attempts_default). Making a
-- partition used to read the whole default partition, to prove it held no
-- row of the new range, while it held the parent's ACCESS EXCLUSIVE lock,
-- which every record needs; and the default kept such rows until retention
-- deleted them one by one. Now:
--
--   making a partition     (webhook_history_create) first locks the default
--                          partition alone and adds to it a CHECK refusing
--                          the new range: the read happens there, under a
--                          lock no claim or record takes, and the CREATE that
--                          follows under the parent's lock finds the proof
--                          in the CHECK and reads nothing. The CHECK goes in
--                          the same transaction. (A live range, one the
--                          records may be writing to the default, locks the
--                          parent first, as before: webhook_history_lock.)
--   moving the default     (webhook_history_move, a batch a statement, by
--                          retention) takes the default's oldest row not past
--                          retention, and moves the rows of its range (the
--                          gap of its slot no partition covers) into a
--                          staging table (webhook_history_staged);
--   attaching              (webhook_history_attach) once the default holds
--                          at most a batch of a staged range's rows, moves
--                          them under the locks and attaches the table as
--                          the range's partition, with the same two proofs
--                          (a CHECK on the table, one on the default), so
--                          that nothing is read under the parent's lock.
--                          The parent's ACCESS EXCLUSIVE lock is taken, as
--                          CREATE takes it: an ATTACH under its own weaker
--                          lock lets a statement plan meanwhile and keep a
--                          cached plan without the new partition.
--
-- A staged row is out of the history's reads until its table is attached
-- (seconds for a range of a million rows). Partitions are never made over a
-- staged range. The default ends with what no range can take: rows without a
-- time, and rows beyond the partitions made ahead until their time nears.
--
-- webhook_outbox_history_delivery_id_idx: `worker attempts` and the
-- console find a delivery's processed row by its delivery id in every
-- history partition: one probe of this index a partition, where each
-- partition was read whole. Its cost is one more entry a processed row.
-- Built inside the migration, it locks each history partition against
-- writes (the record) while it is built: on a large history, build it first
-- without a lock (docs/deployment.md, migration 026), and this then finds it
-- there, valid.
--
-- The ordering lanes (015) kept one row per key ever used. A lane with
-- nothing pending, no dead letter holding it, and no entry for the
-- retention, is removed (webhook_ordering_prune, by retention). Its last
-- sequence is kept, by the largest, in one of 1024 floors of its endpoint
-- (webhook_ordering_floors, by the md5 of the key), and a lane made again
-- (webhook_ordering_lock) starts above its floor: a key's sequence never
-- goes back, so a consumer never takes a new event for a redelivery; it may
-- skip numbers after a key was idle (as it does after a dead letter).
SET LOCAL lock_timeout = '200ms'; -- see 003: never queue producers behind a long transaction

CREATE INDEX IF NOT EXISTS webhook_outbox_history_delivery_id_idx ON webhook_outbox_history (delivery_id);
-- One built ahead and left unfinished is not valid, and no plan would use
-- it: say so rather than carry on without it.
DO $$
BEGIN
    IF NOT (SELECT indisvalid FROM pg_index WHERE indexrelid = 'webhook_outbox_history_delivery_id_idx'::regclass) THEN
        RAISE EXCEPTION 'migration 026: index webhook_outbox_history_delivery_id_idx is not valid: attach an index to every partition of webhook_outbox_history (docs/deployment.md, "Migration 026 on a large history") or drop it, then run worker migrate again';
    END IF;
END;
$$;

-- The ranges staged by webhook_history_move: each a table with the rows of
-- the range [lo, hi) of parent taken out of its default partition, to be
-- attached as that range's partition.
CREATE TABLE IF NOT EXISTS webhook_history_staged (
    staged regclass    PRIMARY KEY,
    parent regclass    NOT NULL,
    lo     timestamptz NOT NULL,
    hi     timestamptz NOT NULL CHECK (hi > lo)
);

-- webhook_history_layout: p_parent's default partition (NULL: none), its
-- partition key, and the condition its rows all meet ('processed' for the
-- outbox's history: its time index is partial on it).
CREATE OR REPLACE FUNCTION webhook_history_layout(p_parent regclass, OUT dflt regclass, OUT col name, OUT rows_are text)
LANGUAGE sql STABLE AS $$
    SELECT nullif(p.partdefid, 0)::regclass, a.attname,
           CASE WHEN EXISTS (SELECT 1 FROM pg_attribute b
                              WHERE b.attrelid = p.partrelid AND b.attname = 'processed' AND NOT b.attisdropped)
                THEN 'processed' ELSE 'true' END
      FROM pg_partitioned_table p
      JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = p.partattrs[0]
     WHERE p.partrelid = p_parent
$$;

-- webhook_history_name: the name of p_parent's partition starting at p_lo.
CREATE OR REPLACE FUNCTION webhook_history_name(p_parent regclass, p_lo timestamptz, p_kind text DEFAULT 'p')
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT format('%s_%s%s', c.relname, p_kind, to_char(p_lo AT TIME ZONE 'UTC', 'YYYYMMDD"t"HH24MI'))
      FROM pg_class c WHERE c.oid = p_parent
$$;

-- webhook_history_lock locks p_parent and its default partition p_dflt
-- (ACCESS EXCLUSIVE) for a new partition [p_lo, p_hi). The default first:
-- it is read under its own lock (webhook_history_refute), which no claim
-- or record takes, and p_parent is locked only after; unless the range is
-- live (within 5 minutes of now): the records may be writing rows of it to
-- the default partition (no partition covers it), holding p_parent's lock
-- while they wait for the default's; p_parent is locked first then, as
-- CREATE … PARTITION OF does.
CREATE OR REPLACE FUNCTION webhook_history_lock(p_parent regclass, p_dflt regclass, p_lo timestamptz, p_hi timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF p_lo < now() + interval '5 minutes' AND p_hi > now() - interval '5 minutes' THEN
        EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', p_parent);
    END IF;
    EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', p_dflt);
END;
$$;

-- webhook_history_refute adds to p_dflt (a default partition, locked by
-- webhook_history_lock) the CHECK webhook_history_refute: no row of p_col
-- in [p_lo, p_hi). Adding it reads p_dflt; it fails with check_violation
-- when such a row is there. The caller drops it in the same transaction.
CREATE OR REPLACE FUNCTION webhook_history_refute(p_dflt regclass, p_col name, p_lo timestamptz, p_hi timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('ALTER TABLE %s ADD CONSTRAINT webhook_history_refute CHECK (NOT (%I IS NOT NULL AND %I >= %L AND %I < %L))',
                   p_dflt, p_col, p_col, p_lo, p_col, p_hi);
END;
$$;

-- webhook_history_create (013) creates one partition of p_parent for
-- [p_lo, p_hi); 0 when the default partition holds rows of that range or a
-- staged table covers part of it, 1 when made. The default partition is
-- read under its own lock first (webhook_history_refute), so that the
-- CREATE, under p_parent's ACCESS EXCLUSIVE lock, reads nothing.
CREATE OR REPLACE FUNCTION webhook_history_create(p_parent regclass, p_lo timestamptz, p_hi timestamptz)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    l record;
BEGIN
    IF EXISTS (SELECT 1 FROM webhook_history_staged s WHERE s.parent = p_parent AND s.lo < p_hi AND s.hi > p_lo) THEN
        RETURN 0;
    END IF;
    SELECT * INTO l FROM webhook_history_layout(p_parent);
    IF l.dflt IS NOT NULL THEN
        PERFORM webhook_history_lock(p_parent, l.dflt, p_lo, p_hi);
        PERFORM webhook_history_refute(l.dflt, l.col, p_lo, p_hi);
    END IF;
    EXECUTE format('CREATE TABLE %I PARTITION OF %s FOR VALUES FROM (%L) TO (%L) WITH (fillfactor = 100)',
                   webhook_history_name(p_parent, p_lo), p_parent, p_lo, p_hi);
    IF l.dflt IS NOT NULL THEN
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT webhook_history_refute', l.dflt);
    END IF;
    RETURN 1;
EXCEPTION WHEN check_violation THEN
    RETURN 0;
END;
$$;

-- webhook_history_stage makes the staging table of the range of p_at: the
-- slot of p_width (aligned on the Unix epoch, as webhook_history_prepare's)
-- less what partitions and staged ranges cover, and returns its row. One
-- at a time with the partitions' creators (their advisory lock).
CREATE OR REPLACE FUNCTION webhook_history_stage(p_parent regclass, p_width interval, p_at timestamptz)
RETURNS webhook_history_staged LANGUAGE plpgsql AS $$
DECLARE
    w double precision := extract(epoch FROM p_width);
    s timestamptz := to_timestamp(floor(extract(epoch FROM p_at) / w) * w);
    l record;
    r webhook_history_staged;
    name text;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('fluxora_history'), 1);
    SELECT * INTO l FROM webhook_history_layout(p_parent);
    WITH covered AS (
        SELECT b.lo, b.hi FROM webhook_partition_bounds(p_parent) b
        UNION ALL
        SELECT g.lo, g.hi FROM webhook_history_staged g WHERE g.parent = p_parent
    )
    SELECT greatest(s, (SELECT max(c.hi) FROM covered c WHERE c.hi <= p_at)),
           least(s + p_width, (SELECT min(c.lo) FROM covered c WHERE c.lo > p_at))
      INTO r.lo, r.hi;
    name := webhook_history_name(p_parent, r.lo, 'm');
    EXECUTE format('CREATE TABLE %I (LIKE %s INCLUDING ALL) WITH (fillfactor = 100)', name, p_parent);
    -- The proof ATTACH looks for: every row in the range (and processed,
    -- for the outbox), so that it reads nothing.
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT webhook_history_range CHECK (%s AND %I IS NOT NULL AND %I >= %L AND %I < %L)',
                   name, l.rows_are, l.col, l.col, r.lo, l.col, r.hi);
    r.staged := name::regclass;
    r.parent := p_parent;
    INSERT INTO webhook_history_staged VALUES (r.*);
    RETURN r;
END;
$$;

-- webhook_history_move moves at most p_batch rows of p_parent's default
-- partition into their staging table, those of the range of its oldest
-- row in [p_from, p_to) (staged first when it is not), and returns how many
-- it moved: 0 when there is none. A staged table whose range a partition
-- covers now (made by other means) goes back through p_parent instead, a
-- batch a call, and is dropped once empty.
CREATE OR REPLACE FUNCTION webhook_history_move(p_parent regclass, p_width interval, p_from timestamptz, p_to timestamptz,
                                                p_batch integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    l record;
    g webhook_history_staged;
    t timestamptz;
    n integer;
BEGIN
    SELECT * INTO l FROM webhook_history_layout(p_parent);
    IF l.dflt IS NULL THEN
        RETURN 0;
    END IF;
    SELECT * INTO g FROM webhook_history_staged s
     WHERE s.parent = p_parent AND EXISTS (SELECT 1 FROM webhook_partition_bounds(p_parent) b WHERE b.lo < s.hi AND b.hi > s.lo)
     LIMIT 1;
    IF FOUND THEN
        EXECUTE format('WITH back AS (DELETE FROM %1$s WHERE ctid = ANY(ARRAY(SELECT ctid FROM %1$s LIMIT $1)) RETURNING *)
                        INSERT INTO %2$s SELECT * FROM back', g.staged, p_parent) USING p_batch;
        GET DIAGNOSTICS n = ROW_COUNT;
        IF n < p_batch THEN
            EXECUTE format('DROP TABLE %s', g.staged);
            DELETE FROM webhook_history_staged WHERE staged = g.staged;
        END IF;
        RETURN greatest(n, 1);
    END IF;
    EXECUTE format('SELECT %1$I FROM %2$s WHERE %3$s AND %1$I >= $1 AND %1$I < $2 ORDER BY %1$I LIMIT 1', l.col, l.dflt, l.rows_are)
       INTO t USING p_from, p_to;
    IF t IS NULL THEN
        RETURN 0;
    END IF;
    SELECT * INTO g FROM webhook_history_staged s WHERE s.parent = p_parent AND s.lo <= t AND t < s.hi;
    IF NOT FOUND THEN
        g := webhook_history_stage(p_parent, p_width, t);
    END IF;
    EXECUTE format('WITH moved AS (DELETE FROM %1$s WHERE ctid = ANY(ARRAY(SELECT ctid FROM %1$s WHERE %2$s AND %3$I >= $1 AND %3$I < $2 LIMIT $3))
                                   RETURNING *)
                    INSERT INTO %4$s SELECT * FROM moved', l.dflt, l.rows_are, l.col, g.staged) USING g.lo, g.hi, p_batch;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END;
$$;

-- webhook_history_attach attaches one staged table of p_parent as its
-- range's partition (named as webhook_history_create names them), and
-- returns its name; NULL when none is ready. Ready: no partition covers
-- its range, and the default partition holds at most p_batch rows of it
-- (rows a record or an import still writes there), which move under the
-- locks first. Nothing is read under p_parent's lock (but for a live
-- range, see webhook_history_lock): the table's CHECK proves its rows in
-- range, the default's proves it holds none. Locks waited for at most
-- 500 ms; one partition a statement.
CREATE OR REPLACE FUNCTION webhook_history_attach(p_parent regclass, p_batch integer)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    l record;
    g record;
    left_in bigint;
    name text;
BEGIN
    PERFORM set_config('lock_timeout', '500ms', true);
    PERFORM pg_advisory_xact_lock(hashtext('fluxora_history'), 1);
    SELECT * INTO l FROM webhook_history_layout(p_parent);
    FOR g IN SELECT s.* FROM webhook_history_staged s
              WHERE s.parent = p_parent
                AND NOT EXISTS (SELECT 1 FROM webhook_partition_bounds(p_parent) b WHERE b.lo < s.hi AND b.hi > s.lo)
              ORDER BY s.lo LOOP
        EXECUTE format('SELECT count(*) FROM (SELECT 1 FROM %1$s WHERE %2$s AND %3$I >= $1 AND %3$I < $2 LIMIT $3) r',
                       l.dflt, l.rows_are, l.col)
           INTO left_in USING g.lo, g.hi, p_batch + 1;
        CONTINUE WHEN left_in > p_batch;
        PERFORM webhook_history_lock(p_parent, l.dflt, g.lo, g.hi);
        EXECUTE format('WITH moved AS (DELETE FROM %1$s WHERE %2$s AND %3$I >= $1 AND %3$I < $2 RETURNING *)
                        INSERT INTO %4$s SELECT * FROM moved', l.dflt, l.rows_are, l.col, g.staged) USING g.lo, g.hi;
        PERFORM webhook_history_refute(l.dflt, l.col, g.lo, g.hi);
        EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', p_parent);
        EXECUTE format('ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (%L) TO (%L)', p_parent, g.staged, g.lo, g.hi);
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT webhook_history_refute', l.dflt);
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT webhook_history_range', g.staged);
        name := webhook_history_name(p_parent, g.lo);
        EXECUTE format('ALTER TABLE %s RENAME TO %I', g.staged, name);
        DELETE FROM webhook_history_staged WHERE staged = g.staged;
        RETURN name;
    END LOOP;
    RETURN NULL;
END;
$$;

-- The lanes' floors: the largest last sequence of the lanes removed, by
-- endpoint (the nil uuid for the WEBHOOK_URL endpoint) and bucket of the
-- key (webhook_ordering_bucket).
CREATE TABLE IF NOT EXISTS webhook_ordering_floors (
    endpoint_id uuid    NOT NULL,
    bucket      integer NOT NULL CHECK (bucket >= 0 AND bucket < 1024),
    last_seq    bigint  NOT NULL,
    PRIMARY KEY (endpoint_id, bucket)
);
SELECT webhook_copy_grants('webhook_ordering_lanes', 'webhook_ordering_floors');

-- webhook_ordering_bucket: the key's floor among 1024, from its md5 (the
-- same on every server and version).
CREATE OR REPLACE FUNCTION webhook_ordering_bucket(p_key text) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
    SELECT ('x' || substr(md5(p_key), 1, 3))::bit(12)::integer & 1023
$$;

-- webhook_ordering_lock (015) locks the lane (creating its row) and returns
-- its next sequence number when p_next, else its last. A lane made (again)
-- starts above its floor. The lane is updated first: a lane removed
-- meanwhile is waited for and found gone, and the floor is then read with
-- a snapshot that sees its removal (a single INSERT … ON CONFLICT would
-- insert the values it computed before the wait).
CREATE OR REPLACE FUNCTION webhook_ordering_lock(p_endpoint uuid, p_key text, p_next boolean, p_at_least bigint)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    e uuid := coalesce(p_endpoint, webhook_ordering_nil());
    seq bigint;
BEGIN
    UPDATE webhook_ordering_lanes l
       SET last_seq = CASE WHEN p_next THEN l.last_seq + 1 ELSE greatest(l.last_seq, coalesce(p_at_least, 0)) END,
           touched_at = now()
     WHERE l.endpoint_id = e AND l.ordering_key = p_key
    RETURNING l.last_seq INTO seq;
    IF FOUND THEN
        RETURN seq;
    END IF;
    SELECT coalesce(max(f.last_seq), 0) INTO seq
      FROM webhook_ordering_floors f
     WHERE f.endpoint_id = e AND f.bucket = webhook_ordering_bucket(p_key);
    INSERT INTO webhook_ordering_lanes AS l (endpoint_id, ordering_key, last_seq)
    VALUES (e, p_key, CASE WHEN p_next THEN seq + 1 ELSE greatest(seq, coalesce(p_at_least, 0)) END)
    ON CONFLICT (endpoint_id, ordering_key) DO UPDATE
        SET last_seq = CASE WHEN p_next THEN l.last_seq + 1 ELSE greatest(l.last_seq, coalesce(p_at_least, 0)) END,
            touched_at = now()
    RETURNING l.last_seq INTO seq;
    RETURN seq;
END;
$$;

-- webhook_ordering_prune looks at the p_limit lanes after (p_endpoint,
-- p_key) in key order and removes those untouched for p_idle with nothing
-- pending and no dead letter holding them, raising their floors; it
-- returns how many it removed and the last lane it looked at (NULL after
-- the last lane: start again from the first). Lanes are locked first as
-- producers and records lock them (skipping those locked now), then read
-- with a snapshot taken after the locks (015): a row entering a lane either
-- committed before (the lane is busy and stays) or waits, and then makes
-- the lane again above its floor.
CREATE OR REPLACE FUNCTION webhook_ordering_prune(p_idle interval, p_endpoint uuid, p_key text, p_limit integer,
                                                  OUT removed integer, OUT last_endpoint uuid, OUT last_key text)
LANGUAGE plpgsql AS $$
DECLARE
    -- Before every lane: keys are never empty.
    from_endpoint uuid := coalesce(p_endpoint, webhook_ordering_nil());
    from_key text := coalesce(p_key, '');
    locked webhook_ordering_lanes[];
BEGIN
    SELECT w.endpoint_id, w.ordering_key INTO last_endpoint, last_key
      FROM (SELECT l.endpoint_id, l.ordering_key FROM webhook_ordering_lanes l
             WHERE (l.endpoint_id, l.ordering_key) > (from_endpoint, from_key)
             ORDER BY l.endpoint_id, l.ordering_key LIMIT p_limit) w
     ORDER BY w.endpoint_id DESC, w.ordering_key DESC LIMIT 1;
    IF last_endpoint IS NULL THEN
        removed := 0;
        RETURN;
    END IF;
    SELECT array_agg(l) INTO locked
      FROM (SELECT l.* FROM webhook_ordering_lanes l
             WHERE (l.endpoint_id, l.ordering_key) > (from_endpoint, from_key)
               AND (l.endpoint_id, l.ordering_key) <= (last_endpoint, last_key)
               AND l.touched_at < now() - p_idle
             ORDER BY l.endpoint_id, l.ordering_key
               FOR UPDATE SKIP LOCKED) l;
    WITH gone AS (
        DELETE FROM webhook_ordering_lanes l
         USING unnest(locked) c
         WHERE l.endpoint_id = c.endpoint_id AND l.ordering_key = c.ordering_key
           AND NOT webhook_ordering_busy(nullif(l.endpoint_id, webhook_ordering_nil()), l.ordering_key)
        RETURNING l.endpoint_id, l.ordering_key, l.last_seq
    ), floors AS (
        INSERT INTO webhook_ordering_floors AS f (endpoint_id, bucket, last_seq)
        SELECT g.endpoint_id, webhook_ordering_bucket(g.ordering_key), max(g.last_seq)
          FROM gone g
         GROUP BY 1, 2
        ON CONFLICT (endpoint_id, bucket) DO UPDATE SET last_seq = greatest(f.last_seq, excluded.last_seq)
        RETURNING 1
    )
    SELECT count(*) INTO removed FROM gone;
END;
$$;
