-- The ordering keys' lanes (migration 015; ARCHITECTURE.md, "Where rows
-- live"): which keys are blocked.

-- name: blocked_keys
-- By endpoint name (:'default_endpoint' for the WEBHOOK_URL endpoint, whose
-- endpoint_id is NULL; '' for a removed one), how many keys are blocked,
-- and how long, in seconds, the oldest has waited. A key is blocked when
-- rows wait behind a head that cannot go now (its retry is scheduled
-- later, or it was dead-lettered and the endpoint holds its keys), or a
-- dead letter holds it; it waits since its oldest waiting row's
-- created_at, or its dead letter's death. Waiting rows are read through
-- webhook_outbox_lane_idx; one probe of a lane's head per lane with
-- waiting rows: a lane whose head is due or in flight is not blocked.
WITH waiting AS (
  SELECT w.endpoint_id,
    w.ordering_key,
    min(w.created_at) AS since
  FROM webhook_outbox w
  WHERE NOT w.processed
    AND w.ordering_key IS NOT NULL
    AND (w.endpoint_id IS NOT NULL OR w.fanout IS NOT NULL)
    AND w.held
  GROUP BY w.endpoint_id, w.ordering_key
), stuck AS (
  SELECT w.endpoint_id,
    w.ordering_key,
    w.since
  FROM waiting w
  WHERE w.endpoint_id IS NOT NULL
    AND NOT EXISTS (
      SELECT 1
      FROM webhook_outbox h
      WHERE NOT h.processed
        AND h.ordering_key = w.ordering_key
        AND h.endpoint_id = w.endpoint_id
        AND NOT h.held
        AND (h.created_at <= now() OR h.locked_until > now()))
  UNION ALL
  SELECT w.endpoint_id,
    w.ordering_key,
    w.since
  FROM waiting w
  WHERE w.endpoint_id IS NULL
    AND NOT EXISTS (
      SELECT 1
      FROM webhook_outbox h
      WHERE NOT h.processed
        AND h.ordering_key = w.ordering_key
        AND h.endpoint_id IS NULL
        AND h.fanout IS NOT NULL
        AND NOT h.held
        AND (h.created_at <= now() OR h.locked_until > now()))
  UNION ALL
  SELECT d.endpoint_id,
    d.ordering_key,
    min(d.died_at) AS since
  FROM webhook_dead_letter d
  WHERE d.ordering_key IS NOT NULL
    AND NOT d.order_broken
    AND NOT d.fan_out
  GROUP BY d.endpoint_id, d.ordering_key
), lanes AS (
  SELECT endpoint_id,
    ordering_key,
    min(since) AS since
  FROM stuck
  GROUP BY endpoint_id, ordering_key
)
SELECT coalesce(e.name, CASE WHEN l.endpoint_id IS NULL THEN :'default_endpoint'::text ELSE '' END) AS endpoint,
  count(*) AS keys,
  coalesce(EXTRACT(EPOCH FROM now() - min(webhook_time_clamp(l.since))), 0)::float8 AS oldest_seconds
FROM lanes l
LEFT JOIN webhook_endpoints e ON e.id = l.endpoint_id
GROUP BY 1
ORDER BY 1;
