-- The console's reads: the last hour's figures of every endpoint, an
-- endpoint's recent attempts, and a delivery's attempts and row found by
-- its delivery id or its event's. Every read of webhook_attempts is bounded
-- by started_at, or probes its delivery_id index, and every read of the
-- outbox's history by processed_at, so that a plan holds only the
-- partitions of that time (ARCHITECTURE.md, "The operators' reads").

-- name: endpoint_hours
-- The attempts that started at or after :'since', by endpoint: how many, how
-- many delivered, the median and 99th percentile of their durations in
-- milliseconds. Those that say they started more than an hour ahead of the
-- database clock (a worker's clock far off) are left out: the range,
-- bounded both ways, is read through the time index with a generic plan
-- too (not the day's partition whole).
SELECT webhook_endpoint_name(d.endpoint_id, e.name) AS name,
  d.n AS attempts,
  d.ok AS succeeded,
  d.p50 AS p50_ms,
  d.p99 AS p99_ms
FROM (
  SELECT endpoint_id,
    count(*) AS n,
    count(*) FILTER (WHERE error_class IS NULL) AS ok,
    percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) AS p50,
    percentile_cont(0.99) WITHIN GROUP (ORDER BY duration_ms) AS p99
  FROM webhook_attempts
  WHERE started_at >= :'since'
    AND started_at < now() + interval '1 hour'
  GROUP BY endpoint_id
) d
LEFT JOIN webhook_endpoints e ON e.id = d.endpoint_id;

-- name: endpoint_attempts
-- The attempts that started at or after :'since', newest first, at most
-- :'limit', of the endpoint :'endpoint_id' (NULL: the WEBHOOK_URL endpoint)
-- when :'endpoint_given', else of every endpoint.
SELECT d.delivery_id::text AS delivery_id, d.attempt, webhook_time_clamp(d.started_at) AS started_at, d.duration_ms,
  webhook_endpoint_name(d.endpoint_id, e.name) AS endpoint, d.status, d.error_class, d.error
FROM webhook_attempts d
LEFT JOIN webhook_endpoints e ON e.id = d.endpoint_id
WHERE d.started_at >= :'since'
  AND (NOT :'endpoint_given'::boolean OR d.endpoint_id IS NOT DISTINCT FROM :'endpoint_id'::uuid)
ORDER BY d.started_at DESC, d.id DESC
LIMIT :'limit';

-- name: search_attempts
-- The attempts of the delivery :'id', and of the deliveries the event :'id'
-- was fanned out to (each one's id is md5 of the event's id, '/', the
-- endpoint's id), by delivery and oldest first. An id whose attempts are a
-- table endpoint's is a delivery, not an event (an event's own attempts are
-- the WEBHOOK_URL endpoint's): its fan-out is not looked for. A delivery is
-- one probe of the delivery_id index per partition; an event, one index
-- scan more per partition with one key per endpoint (= ANY of an array: a
-- semi-join would read the partitions whole).
WITH own AS MATERIALIZED (
  SELECT d.delivery_id, d.attempt, d.started_at, d.duration_ms, d.endpoint_id, d.status, d.error_class, d.error, d.id
  FROM webhook_attempts d
  WHERE d.delivery_id = :'id'::uuid
), fanned AS (
  SELECT d.delivery_id, d.attempt, d.started_at, d.duration_ms, d.endpoint_id, d.status, d.error_class, d.error, d.id
  FROM webhook_attempts d
  WHERE NOT EXISTS (SELECT 1 FROM own WHERE own.endpoint_id IS NOT NULL)
    AND d.delivery_id = ANY(ARRAY(SELECT md5(:'id'::uuid::text || '/' || w.id::text)::uuid FROM webhook_endpoints w))
)
SELECT d.delivery_id::text AS delivery_id, d.attempt, webhook_time_clamp(d.started_at) AS started_at, d.duration_ms,
  webhook_endpoint_name(d.endpoint_id, e.name) AS endpoint, d.status, d.error_class, d.error
FROM (
  SELECT * FROM own
  UNION ALL
  SELECT * FROM fanned
) d
LEFT JOIN webhook_endpoints e ON e.id = d.endpoint_id
ORDER BY d.delivery_id, d.started_at, d.id;

-- name: delivery_row
-- The row of the delivery or event :'id': a dead letter first, then a
-- pending row (or a delivery of a fan-out in flight, which carries its
-- event's payload), then one processed in [:'from', :'to'] (the bounds prune
-- the history to its partitions; the pending partition has no delivery_id
-- index: it is read whole). The payload is cut to :'preview' characters.
SELECT r.place,
  r.event_type,
  left(r.payload::text, :'preview') AS payload_preview,
  octet_length(r.payload::text) AS payload_bytes,
  coalesce(r.headers, '{}'::jsonb) AS headers,
  coalesce(r.ordering_key, '') AS ordering_key,
  coalesce(r.ordering_seq, 0) AS sequence
FROM (
  SELECT 'dead_letter' AS place, event_type, payload, headers, ordering_key, ordering_seq, 1 AS rank
  FROM webhook_dead_letter
  WHERE delivery_id = :'id'::uuid
  UNION ALL
  SELECT CASE WHEN locked_until > now() THEN 'in_flight' ELSE 'pending' END, event_type, payload, headers, ordering_key, ordering_seq, 2
  FROM webhook_outbox
  WHERE NOT processed AND delivery_id = :'id'::uuid
  UNION ALL
  SELECT CASE WHEN f.locked_until > now() THEN 'in_flight' ELSE 'pending' END, f.event_type, f.payload, f.headers, f.ordering_key, NULL, 2
  FROM webhook_fan_out_in_flight() f
  WHERE f.delivery_id = :'id'::uuid
  UNION ALL
  SELECT 'processed', event_type, payload, headers, ordering_key, ordering_seq, 3
  FROM webhook_outbox
  WHERE processed AND processed_at >= :'from' AND processed_at <= :'to' AND delivery_id = :'id'::uuid
) r
ORDER BY r.rank
LIMIT 1;
