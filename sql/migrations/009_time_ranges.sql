-- 009: every timestamp a producer or operator can write is a finite time
-- from 1970-01-01 to 9999-12-31 (UTC). The worker cannot handle others:
-- -infinity, infinity, BC dates or a year past 9999 do not scan into Go's
-- time.Time or do not format as RFC 3339, and a claim that met such a row
-- used to drop the whole batch it had leased. Each CHECK raises with a
-- message naming the column and the allowed range (a plain CHECK would name
-- only the constraint, and its DETAIL would print the whole row, payload
-- included). The range test comes first: a valid time, or NULL, never calls
-- the function, so producers pay two comparisons a column.
--
-- Rows already there: webhook_fix_times moves every pending outbox row with
-- a time out of range to the dead letter, with a reason naming the column
-- (never deleted silently; `worker dlq replay` brings it back with a fresh
-- created_at), and brings the times of history (processed rows, dead
-- letters, attempts, endpoints) into the range, clamped to its nearest end.
-- The constraints are added NOT VALID, so that they hold for every new row
-- at once without a scan under this migration's brief ACCESS EXCLUSIVE
-- lock; 010 fixes what slipped in meanwhile and validates them.
SET LOCAL lock_timeout = '200ms'; -- see 003: never queue producers behind a long transaction

-- webhook_dead_letter.fan_out: true for an event dead-lettered before its
-- fan-out (endpoint_id NULL): its replay fans it out again, to every
-- subscribed endpoint, instead of sending it to the WEBHOOK_URL endpoint
-- only. Catalog-only: a constant default.
ALTER TABLE webhook_dead_letter ADD COLUMN IF NOT EXISTS fan_out boolean NOT NULL DEFAULT false;

-- webhook_time_ok is the CHECK of one timestamp column: true for NULL or a
-- time in range, otherwise it raises, naming the column (col) and the range.
CREATE OR REPLACE FUNCTION webhook_time_ok(col text, t timestamptz) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF t IS NULL OR (t >= '1970-01-01 00:00:00+00' AND t < '10000-01-01 00:00:00+00') THEN
        RETURN true;
    END IF;
    RAISE EXCEPTION '%: % is out of range: a time must be finite, from 1970-01-01 to 9999-12-31 (UTC)', col, t
        USING ERRCODE = '23514', CONSTRAINT = replace(col, '.', '_') || '_range';
END;
$$;

-- webhook_time_clamp is t brought into the range of webhook_time_ok
-- (NULL stays NULL).
CREATE OR REPLACE FUNCTION webhook_time_clamp(t timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN t IS NOT NULL
                THEN greatest(least(t, '9999-12-31 23:59:59.999999+00'::timestamptz), '1970-01-01 00:00:00+00'::timestamptz) END
$$;

-- webhook_time_bad is the complement of the range of webhook_time_ok.
CREATE OR REPLACE FUNCTION webhook_time_bad(t timestamptz) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT t IS NOT NULL AND NOT (t >= '1970-01-01 00:00:00+00' AND t < '10000-01-01 00:00:00+00')
$$;

-- webhook_fix_times deals with the rows already out of range (see above)
-- and returns how many pending rows it dead-lettered.
CREATE OR REPLACE FUNCTION webhook_fix_times() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_moved bigint;
BEGIN
    WITH moved AS (
        DELETE FROM webhook_outbox o
         WHERE NOT o.processed
           AND (webhook_time_bad(o.created_at) OR webhook_time_bad(o.processed_at) OR webhook_time_bad(o.locked_until))
        RETURNING o.delivery_id, o.event_type, o.payload, o.attempt, o.endpoint_id, o.headers,
                  (o.endpoint_id IS NULL AND o.fanout IS NULL) AS fan_out,
                  CASE WHEN webhook_time_bad(o.created_at) THEN 'created_at ' || o.created_at::text
                       WHEN webhook_time_bad(o.processed_at) THEN 'processed_at ' || o.processed_at::text
                       ELSE 'locked_until ' || o.locked_until::text END AS what
    )
    INSERT INTO webhook_dead_letter (delivery_id, event_type, payload, attempts, last_status, last_error, endpoint_id, headers, fan_out)
    SELECT delivery_id, event_type, payload, attempt - 1, NULL,
           left('migration 009: ' || what || ' is out of range (a time must be finite, from 1970-01-01 to 9999-12-31 UTC); replay to send it now', 512),
           endpoint_id, headers, fan_out
      FROM moved;
    GET DIAGNOSTICS v_moved = ROW_COUNT;

    UPDATE webhook_outbox
       SET created_at = webhook_time_clamp(created_at), processed_at = webhook_time_clamp(processed_at),
           locked_until = webhook_time_clamp(locked_until)
     WHERE processed AND (webhook_time_bad(created_at) OR webhook_time_bad(processed_at) OR webhook_time_bad(locked_until));
    UPDATE webhook_dead_letter SET died_at = webhook_time_clamp(died_at) WHERE webhook_time_bad(died_at);
    UPDATE webhook_attempts SET started_at = webhook_time_clamp(started_at) WHERE webhook_time_bad(started_at);
    UPDATE webhook_endpoints
       SET created_at = webhook_time_clamp(created_at), updated_at = webhook_time_clamp(updated_at),
           failing_since = webhook_time_clamp(failing_since), last_error_at = webhook_time_clamp(last_error_at),
           disabled_at = webhook_time_clamp(disabled_at), secret_previous_until = webhook_time_clamp(secret_previous_until)
     WHERE webhook_time_bad(created_at) OR webhook_time_bad(updated_at) OR webhook_time_bad(failing_since)
        OR webhook_time_bad(last_error_at) OR webhook_time_bad(disabled_at) OR webhook_time_bad(secret_previous_until);
    RETURN v_moved;
END;
$$;

-- Before the constraints: the claim's UPDATE of a row out of range would
-- fail them.
SELECT webhook_fix_times();

-- One constraint per column, named <table>_<column>_range.
DO $$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT * FROM (VALUES
        ('webhook_outbox', 'created_at'), ('webhook_outbox', 'processed_at'), ('webhook_outbox', 'locked_until'),
        ('webhook_dead_letter', 'died_at'), ('webhook_attempts', 'started_at'),
        ('webhook_endpoints', 'created_at'), ('webhook_endpoints', 'updated_at'), ('webhook_endpoints', 'failing_since'),
        ('webhook_endpoints', 'last_error_at'), ('webhook_endpoints', 'disabled_at'),
        ('webhook_endpoints', 'secret_previous_until')) AS v(tab, col)
    LOOP
        BEGIN
            EXECUTE format($f$ALTER TABLE %I ADD CONSTRAINT %I CHECK (%I IS NULL
                OR (%I >= '1970-01-01 00:00:00+00' AND %I < '10000-01-01 00:00:00+00')
                OR webhook_time_ok(%L, %I)) NOT VALID$f$,
                c.tab, c.tab || '_' || c.col || '_range', c.col, c.col, c.col, c.tab || '.' || c.col, c.col);
        EXCEPTION WHEN duplicate_object THEN NULL;
        END;
    END LOOP;
END;
$$;
