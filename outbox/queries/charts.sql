-- The console's charts (migration 023): the attempts, dead letters and
-- backlog of every endpoint, or of one, by time bucket; and the sample of
-- the backlogs the workers' janitor writes once a minute. The attempts are
-- read through webhook_attempts_started_at_idx alone, in the partitions of
-- the range only (ARCHITECTURE.md, "The operators' reads").

-- name: chart
-- The buckets of :'bucket_s' seconds from :'since' to :'until', oldest
-- first, each with the attempts that started in it (delivered, failed, the
-- median and 99th percentile of their durations in milliseconds, NULL
-- without one), the dead letters that died in it (those still held: a
-- replayed or purged one is gone), and the highest backlog sampled in it
-- (NULL: no sample). Of the endpoint :'endpoint_id' (NULL: the WEBHOOK_URL
-- endpoint) when :'endpoint_given', else of every endpoint: the backlog is
-- then each minute's sum. Each bucket reads its own range of the attempts'
-- and the dead letters' time indexes (a range the planner always reads
-- through the index, where a day's or a week's would be read from the
-- table), in the partitions of its time only (pruned again for each
-- bucket), and sorts only its own durations.
WITH minutes AS (
  SELECT s.sampled_at,
    coalesce(sum(s.backlog) FILTER (WHERE NOT :'endpoint_given'::boolean
      OR s.endpoint_id = coalesce(:'endpoint_id'::uuid, webhook_ordering_nil())), 0) AS backlog
  FROM webhook_backlog_samples s
  WHERE s.sampled_at >= :'since'::timestamptz
    AND s.sampled_at < :'until'::timestamptz
  GROUP BY s.sampled_at
), backlog AS (
  SELECT date_bin(:'bucket_s'::bigint * interval '1 second', m.sampled_at, :'since'::timestamptz) AS bucket_start,
    max(m.backlog) AS backlog
  FROM minutes m
  GROUP BY 1
)
SELECT b.bucket_start,
  a.succeeded,
  a.failed,
  d.dead_lettered,
  a.p50_ms,
  a.p99_ms,
  k.backlog
FROM generate_series(:'since'::timestamptz,
  :'until'::timestamptz - :'bucket_s'::bigint * interval '1 second',
  :'bucket_s'::bigint * interval '1 second') AS b(bucket_start)
CROSS JOIN LATERAL (
  SELECT count(*) FILTER (WHERE x.error_class IS NULL) AS succeeded,
    count(*) FILTER (WHERE x.error_class IS NOT NULL) AS failed,
    percentile_cont(0.5) WITHIN GROUP (ORDER BY x.duration_ms) AS p50_ms,
    percentile_cont(0.99) WITHIN GROUP (ORDER BY x.duration_ms) AS p99_ms
  FROM webhook_attempts x
  WHERE x.started_at >= :'since'::timestamptz
    AND x.started_at < :'until'::timestamptz
    AND x.started_at >= b.bucket_start
    AND x.started_at < b.bucket_start + :'bucket_s'::bigint * interval '1 second'
    AND (NOT :'endpoint_given'::boolean OR x.endpoint_id IS NOT DISTINCT FROM :'endpoint_id'::uuid)
) a
CROSS JOIN LATERAL (
  SELECT count(*) AS dead_lettered
  FROM webhook_dead_letter y
  WHERE y.died_at >= b.bucket_start
    AND y.died_at < b.bucket_start + :'bucket_s'::bigint * interval '1 second'
    AND (NOT :'endpoint_given'::boolean OR y.endpoint_id IS NOT DISTINCT FROM :'endpoint_id'::uuid)
) d
LEFT JOIN backlog k ON k.bucket_start = b.bucket_start
ORDER BY b.bucket_start;

-- name: sample_backlog
-- Samples every endpoint's backlog for this minute (by the database clock)
-- unless the minute has its sample: one worker a minute (the first to take
-- the advisory lock; the key makes a second write of the minute a no-op).
-- A row for each endpoint with pending deliveries not waiting behind their
-- lane's head (due, scheduled, in flight, as endpoint_status counts them),
-- and always one for the WEBHOOK_URL endpoint (the nil uuid, 0 when it has
-- none), which marks the minute as sampled. The same turn deletes the
-- samples older than 8 days. A worker whose turn it is not reads one key of
-- the samples: every other step is gated by the turn.
WITH turn AS (
  SELECT date_trunc('minute', now()) AS minute
  WHERE NOT EXISTS (SELECT 1 FROM webhook_backlog_samples WHERE sampled_at = date_trunc('minute', now()))
    AND pg_try_advisory_xact_lock(hashtext('fluxora_backlog_samples'))
), pruned AS (
  DELETE FROM webhook_backlog_samples
  WHERE sampled_at < now() - interval '8 days'
    AND EXISTS (SELECT 1 FROM turn)
), counts AS (
  SELECT coalesce(s.endpoint_id, webhook_ordering_nil()) AS endpoint_id,
    sum(s.n) AS backlog
  FROM (
    SELECT o.endpoint_id,
      count(*) FILTER (WHERE NOT o.held OR o.locked_until > now()) AS n
    FROM webhook_outbox_pending_rows() o
    WHERE (o.endpoint_id IS NOT NULL OR o.fanout IS NOT NULL)
      AND EXISTS (SELECT 1 FROM turn)
    GROUP BY o.endpoint_id
    UNION ALL
    SELECT f.endpoint_id, count(*)
    FROM webhook_fan_out_in_flight() f
    WHERE f.locked_until > now()
      AND EXISTS (SELECT 1 FROM turn)
    GROUP BY f.endpoint_id
  ) s
  GROUP BY 1
)
INSERT INTO webhook_backlog_samples (sampled_at, endpoint_id, backlog)
SELECT t.minute, c.endpoint_id, c.backlog
FROM turn t, counts c
WHERE c.backlog > 0
UNION ALL
SELECT t.minute, webhook_ordering_nil(), 0
FROM turn t
WHERE NOT EXISTS (SELECT 1 FROM counts c WHERE c.endpoint_id = webhook_ordering_nil() AND c.backlog > 0)
ON CONFLICT DO NOTHING;
