-- `worker status` and the console's overview: the outbox's counts and each
-- endpoint's. Pending rows are read through webhook_outbox_pending_rows
-- and the deliveries of fan-outs in flight through webhook_fan_out_in_flight
-- (migration 022; ARCHITECTURE.md, "The operators' reads"). A row is due as
-- the claim takes it: its time has come and no live lease holds it.

-- name: queue_status
-- The outbox's counts: the pending rows read once, the last hour's
-- processed rows once (through the processed_at index). An event in flight
-- counts one row in flight for each delivery it still owes. The oldest age
-- is read through webhook_time_clamp, so that a time out of range cannot
-- fail it.
WITH pending AS (
  SELECT count(*) FILTER (WHERE o.created_at <= now() AND (o.locked_until IS NULL OR o.locked_until <= now()) AND NOT o.held) AS due,
    count(*) FILTER (WHERE o.held) AS waiting,
    count(*) FILTER (WHERE o.created_at > now() AND NOT o.held) AS scheduled,
    coalesce(sum(coalesce(cardinality(o.fan_to) - coalesce(cardinality(o.fan_done), 0), 1)) FILTER (WHERE o.locked_until > now()), 0) AS in_flight,
    coalesce(EXTRACT(EPOCH FROM now() - min(webhook_time_clamp(o.created_at)) FILTER (WHERE o.created_at <= now())), 0) AS oldest,
    coalesce(sum(o.reclaims), 0) AS reclaims
  FROM webhook_outbox_pending_rows() o
), recent AS (
  SELECT count(*) FILTER (WHERE endpoint_id IS NOT NULL OR fanout IS DISTINCT FROM 0) AS processed,
    count(*) FILTER (WHERE endpoint_id IS NULL AND fanout = 0) AS unrouted,
    coalesce(sum(reclaims), 0) AS reclaims
  FROM webhook_outbox
  WHERE processed AND processed_at > now() - interval '1 hour'
)
SELECT pending.due AS pending_due,
  pending.waiting AS waiting_for_key,
  pending.scheduled AS scheduled,
  pending.in_flight AS in_flight,
  pending.oldest::float8 AS oldest_pending_seconds,
  recent.processed AS processed_last_hour,
  recent.unrouted AS unrouted_last_hour,
  pending.reclaims + recent.reclaims AS leases_reclaimed_last_hour,
  (SELECT count(*) FROM webhook_dead_letter) AS dead_letters,
  (SELECT count(*) FROM pg_stat_get_activity(NULL) s
   WHERE s.datid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
     AND s.application_name = 'fluxora-webhook-listener')
    AS listening_workers
FROM pending, recent;

-- name: endpoint_status
-- Every endpoint of the table, and the WEBHOOK_URL one first when :'env' (it
-- is configured) or it has rows; :'only', when not '', keeps the endpoint of
-- that name. Pending rows are read once, dead letters once. A row with
-- endpoint_id NULL and fanout NULL is an event not fanned out yet: nobody's
-- delivery. The joins compare the endpoint's id with NULL read as
-- webhook_ordering_nil(), equalities a hash join can use. Health times are
-- read through webhook_time_clamp; secret_unreadable is a worker's mark.
WITH p AS (
  SELECT s.endpoint_id,
    sum(s.due) AS due,
    sum(s.waiting) AS waiting,
    sum(s.scheduled) AS scheduled,
    sum(s.in_flight) AS in_flight
  FROM (
    SELECT o.endpoint_id,
      count(*) FILTER (WHERE o.created_at <= now() AND (o.locked_until IS NULL OR o.locked_until <= now()) AND NOT o.held) AS due,
      count(*) FILTER (WHERE o.held) AS waiting,
      count(*) FILTER (WHERE o.created_at > now() AND NOT o.held) AS scheduled,
      count(*) FILTER (WHERE o.locked_until > now()) AS in_flight
    FROM webhook_outbox_pending_rows() o
    WHERE o.endpoint_id IS NOT NULL OR o.fanout IS NOT NULL
    GROUP BY o.endpoint_id
    UNION ALL
    SELECT f.endpoint_id, 0, 0, 0, count(*)
    FROM webhook_fan_out_in_flight() f
    WHERE f.locked_until > now()
    GROUP BY f.endpoint_id
  ) s
  GROUP BY s.endpoint_id
), d AS (
  SELECT endpoint_id,
    count(*) AS dead
  FROM webhook_dead_letter
  GROUP BY endpoint_id
), e AS (
  SELECT id,
    name,
    url,
    enabled,
    coalesce(disabled_reason, '') AS disabled_reason,
    webhook_time_clamp(failing_since) AS failing_since,
    coalesce(last_error, '') AS last_error,
    last_status,
    webhook_time_clamp(last_error_at) AS last_error_at,
    webhook_time_clamp(client_cert_not_after) AS client_cert_not_after,
    coalesce(secret_unreadable, '') AS secret_unreadable,
    secret_unreadable_at
  FROM webhook_endpoints
  UNION ALL
  SELECT NULL, webhook_endpoint_name(NULL, NULL), '', true, '', NULL, '', NULL, NULL, NULL, '', NULL
  WHERE :'env'::boolean OR EXISTS (SELECT 1 FROM p WHERE endpoint_id IS NULL) OR EXISTS (SELECT 1 FROM d WHERE endpoint_id IS NULL)
)
SELECT e.name,
  e.url,
  e.enabled,
  e.disabled_reason,
  coalesce(p.due, 0) AS pending_due,
  coalesce(p.waiting, 0) AS waiting_for_key,
  coalesce(p.scheduled, 0) AS scheduled,
  coalesce(p.in_flight, 0) AS in_flight,
  coalesce(d.dead, 0) AS dead_letters,
  e.failing_since,
  e.last_error,
  e.last_status,
  e.last_error_at,
  e.client_cert_not_after,
  e.secret_unreadable,
  e.secret_unreadable_at
FROM e
LEFT JOIN p ON coalesce(p.endpoint_id, webhook_ordering_nil()) = coalesce(e.id, webhook_ordering_nil()) AND (p.endpoint_id IS NULL) = (e.id IS NULL)
LEFT JOIN d ON coalesce(d.endpoint_id, webhook_ordering_nil()) = coalesce(e.id, webhook_ordering_nil()) AND (d.endpoint_id IS NULL) = (e.id IS NULL)
WHERE :'only'::text = '' OR e.name = :'only'::text
ORDER BY e.id IS NOT NULL, e.name;
