-- `worker dlq replay`: dead letters back to the outbox. Each statement
-- selects the dead letters d of a replay the same way: the delivery ids
-- :'ids' (NULL for all), the event type :'event_type' ('' for any), died at
-- or after :'since' and before :'until' (NULL: no bound), of the endpoint
-- filter (:'endpoint_given', :'endpoint_id': queries/dead_letters.sql).

-- name: replay_missing
-- The delivery ids of :'ids' that are not in the dead letter table.
SELECT coalesce(array_agg(i::text), '{}') AS missing
FROM unnest(:'ids'::uuid[]) i
WHERE NOT EXISTS (SELECT 1 FROM webhook_dead_letter d WHERE d.delivery_id = i);

-- name: replay_blocked
-- The dead letters of the selection that replay leaves, by endpoint: those
-- of a disabled endpoint, or of a removed one (name '').
SELECT d.endpoint_id::text AS endpoint_id,
  coalesce(e.name, '') AS name,
  count(*) AS count
FROM webhook_dead_letter d
LEFT JOIN webhook_endpoints e ON e.id = d.endpoint_id
WHERE (:'ids'::uuid[] IS NULL OR d.delivery_id = ANY(:'ids'::uuid[]))
  AND (:'event_type'::text = '' OR d.event_type = :'event_type'::text)
  AND (:'since'::timestamptz IS NULL OR d.died_at >= :'since'::timestamptz)
  AND (:'until'::timestamptz IS NULL OR d.died_at < :'until'::timestamptz)
  AND (NOT :'endpoint_given'::boolean OR d.endpoint_id IS NOT DISTINCT FROM :'endpoint_id'::uuid)
  AND d.endpoint_id IS NOT NULL
  AND (e.id IS NULL OR NOT e.enabled)
GROUP BY 1, 2
ORDER BY 2, 1;

-- name: replay
-- Moves the selection back to the outbox in one statement, so that a
-- replay never loses or duplicates an entry: each goes back, as a fresh
-- attempt 1 with the same delivery id, to its own endpoint (for the
-- WEBHOOK_URL endpoint, an event row with fanout 1, unless it died before
-- its fan-out: then fanout NULL, fanned out again; ARCHITECTURE.md,
-- "The operators' reads"). Dead letters of a disabled or removed endpoint
-- stay. Rows enter their lanes in lane order.
WITH moved AS (
  DELETE FROM webhook_dead_letter d
  WHERE (:'ids'::uuid[] IS NULL OR d.delivery_id = ANY(:'ids'::uuid[]))
    AND (:'event_type'::text = '' OR d.event_type = :'event_type'::text)
    AND (:'since'::timestamptz IS NULL OR d.died_at >= :'since'::timestamptz)
    AND (:'until'::timestamptz IS NULL OR d.died_at < :'until'::timestamptz)
    AND (NOT :'endpoint_given'::boolean OR d.endpoint_id IS NOT DISTINCT FROM :'endpoint_id'::uuid)
    AND (d.endpoint_id IS NULL OR EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.id = d.endpoint_id AND e.enabled))
  RETURNING d.delivery_id, d.event_type, d.payload, d.endpoint_id, d.headers, d.fan_out, d.ordering_key, d.ordering_seq
)
INSERT INTO webhook_outbox (delivery_id, event_type, payload, endpoint_id, fanout, headers, ordering_key, ordering_seq)
SELECT delivery_id, event_type, payload, endpoint_id, CASE WHEN endpoint_id IS NULL AND NOT fan_out THEN 1 END, headers,
  ordering_key, CASE WHEN NOT fan_out THEN ordering_seq END
FROM moved
ORDER BY coalesce(endpoint_id, webhook_ordering_nil()), ordering_key, ordering_seq;
