-- 023: what the console's charts read (ARCHITECTURE.md, "The operators'
-- reads"): the attempts by time, and a sample of every endpoint's backlog a
-- minute.
--
-- webhook_attempts_started_at_idx: the charts count the attempts of an
-- hour, a day or a week by time bucket, and take the percentiles of their
-- durations. The partitions (013) bound such a read to the partitions of
-- its range, but a day partition is read whole for the last hour. The
-- index holds what the charts read besides the time (the endpoint, the
-- class, the duration), so that they read it alone (an index-only scan)
-- for their range, whatever the partitions' width. Its cost is one more
-- entry a recorded attempt, written at the right end of the index (times
-- grow). Built inside the migration, it locks each partition of the
-- attempts against writes while it is built: on a large history, build it
-- first without a lock (docs/deployment.md, migration 023), and this then
-- finds it there, valid.
--
-- webhook_backlog_samples: the attempts do not say how many deliveries
-- were waiting. The workers' janitor writes, once a minute, one sample of
-- every endpoint's backlog (pending, scheduled and in flight, as the
-- console counts it); one worker a minute, the key making a second write
-- of the same minute a no-op. It holds a row for the WEBHOOK_URL endpoint
-- (the nil uuid, as the ordering lanes do, 0 when it has none) every minute
-- sampled, and one for each endpoint with a backlog; the same statement
-- deletes the samples older than 8 days. Older workers run unchanged:
-- they neither write nor read it.
SET LOCAL lock_timeout = '200ms'; -- see 003: never queue producers behind a long transaction

CREATE INDEX IF NOT EXISTS webhook_attempts_started_at_idx ON webhook_attempts (started_at)
    INCLUDE (endpoint_id, error_class, duration_ms);
-- One built ahead and left unfinished (a partition without its index
-- attached) is not valid, and no plan would use it: say so rather than
-- carry on without it.
DO $$
BEGIN
    IF NOT (SELECT indisvalid FROM pg_index WHERE indexrelid = 'webhook_attempts_started_at_idx'::regclass) THEN
        RAISE EXCEPTION 'migration 023: index webhook_attempts_started_at_idx is not valid: attach an index to every partition of webhook_attempts (docs/deployment.md, "Migration 023 on a large history") or drop it, then run worker migrate again';
    END IF;
END;
$$;

CREATE TABLE IF NOT EXISTS webhook_backlog_samples (
    -- The minute of the sample, by the database clock.
    sampled_at  timestamptz NOT NULL,
    -- The endpoint; the nil uuid (webhook_ordering_nil()) for the
    -- WEBHOOK_URL endpoint, whose row marks the minute as sampled.
    endpoint_id uuid        NOT NULL,
    -- Its pending deliveries then: due, scheduled and in flight.
    backlog     bigint      NOT NULL CHECK (backlog >= 0),
    PRIMARY KEY (sampled_at, endpoint_id)
);
SELECT webhook_copy_grants('webhook_attempts', 'webhook_backlog_samples');
