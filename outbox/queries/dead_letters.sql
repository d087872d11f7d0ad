-- `worker dlq list` and `worker dlq purge`, and the lookup of an
-- endpoint filter. A filter keeps every endpoint unless :'endpoint_given';
-- given, the endpoint of id :'endpoint_id', or the WEBHOOK_URL endpoint's
-- rows (endpoint_id NULL) when that is NULL.

-- name: endpoint_id_by_name
-- The id of the endpoint named :'name'.
SELECT id::text AS id
FROM webhook_endpoints
WHERE name = :'name';

-- name: dead_letters
-- Dead letters newest first, at most :'limit': of the event type :'event_type'
-- ('' for any), died at or after :'since' and before :'until' (NULL: no
-- bound), of the endpoint filter. died_at is read through
-- webhook_time_clamp.
SELECT d.delivery_id::text AS delivery_id,
  webhook_endpoint_name(d.endpoint_id, e.name) AS endpoint,
  d.event_type,
  d.attempts,
  d.last_status,
  d.last_error,
  webhook_time_clamp(d.died_at) AS died_at,
  coalesce(d.ordering_key, '') AS ordering_key,
  coalesce(d.ordering_seq, 0) AS ordering_seq,
  d.order_broken
FROM webhook_dead_letter d
LEFT JOIN webhook_endpoints e ON e.id = d.endpoint_id
WHERE (:'event_type'::text = '' OR d.event_type = :'event_type'::text)
  AND (NOT :'endpoint_given'::boolean OR d.endpoint_id IS NOT DISTINCT FROM :'endpoint_id'::uuid)
  AND (:'since'::timestamptz IS NULL OR d.died_at >= :'since'::timestamptz)
  AND (:'until'::timestamptz IS NULL OR d.died_at < :'until'::timestamptz)
ORDER BY d.died_at DESC, d.id DESC
LIMIT :'limit';

-- name: count_dead_letters_before
-- How many dead letters of the endpoint filter died before :'before': those
-- purge_dead_letters deletes.
SELECT count(*) AS n
FROM webhook_dead_letter d
WHERE d.died_at < :'before'
  AND (NOT :'endpoint_given'::boolean OR d.endpoint_id IS NOT DISTINCT FROM :'endpoint_id'::uuid);

-- name: purge_dead_letters
-- Deletes the dead letters of the endpoint filter that died before
-- :'before'. One that holds its ordering key releases it (the trigger
-- webhook_ordering_release, migration 015).
DELETE FROM webhook_dead_letter d
WHERE d.died_at < :'before'
  AND (NOT :'endpoint_given'::boolean OR d.endpoint_id IS NOT DISTINCT FROM :'endpoint_id'::uuid);
