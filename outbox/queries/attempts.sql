-- `worker attempts`: one delivery's history and where it is now.

-- name: delivery_attempts
-- The attempts of the delivery :'id', oldest first; the endpoint named as in
-- the dead letter list (webhook_endpoint_name), started_at read through
-- webhook_time_clamp.
SELECT d.attempt, webhook_time_clamp(d.started_at) AS started_at, d.duration_ms,
  webhook_endpoint_name(d.endpoint_id, e.name) AS endpoint, d.status, d.error_class, d.error
FROM webhook_attempts d
LEFT JOIN webhook_endpoints e ON e.id = d.endpoint_id
WHERE d.delivery_id = :'id'::uuid
ORDER BY d.started_at, d.id;

-- name: delivery_state
-- Where the delivery :'id' is: a pending row first (or a delivery of a
-- fan-out in flight, which has no row until its outcome; pending again
-- when its event's lease ended), then a dead letter, then a processed row
-- (fanout: how many deliveries an event made). The due time is read
-- through webhook_time_clamp.
SELECT s.state,
  s.attempt,
  s.due,
  s.reason,
  s.fanout
FROM (
  SELECT CASE WHEN locked_until > now() THEN 'in_flight' ELSE 'pending' END AS state, attempt, webhook_time_clamp(created_at) AS due,
    NULL::text AS reason, 0 AS fanout, 1 AS rank
  FROM webhook_outbox
  WHERE delivery_id = :'id'::uuid AND NOT processed
  UNION ALL
  SELECT CASE WHEN f.locked_until > now() THEN 'in_flight' ELSE 'pending' END, 1, webhook_time_clamp(f.created_at), NULL, 0, 1
  FROM webhook_fan_out_in_flight() f
  WHERE f.delivery_id = :'id'::uuid
  UNION ALL
  SELECT 'dead_letter', attempts, NULL, last_error, 0, 2
  FROM webhook_dead_letter
  WHERE delivery_id = :'id'::uuid
  UNION ALL
  SELECT 'processed', attempt, NULL, NULL, coalesce(fanout, 0), 3
  FROM webhook_outbox
  WHERE delivery_id = :'id'::uuid AND processed
) s
ORDER BY s.rank
LIMIT 1;
