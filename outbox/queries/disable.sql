-- Disabling and removing an endpoint, each in one transaction that locks
-- the endpoint's row first.

-- name: lock_endpoint
-- Locks the endpoint of id :'id' (uuid text: not one is SQLSTATE 22P02) and
-- reads whether it is enabled, so that the flag read is the one the
-- disabling changes.
SELECT id::text AS id,
  enabled
FROM webhook_endpoints
WHERE id = :'id'::text::uuid
FOR UPDATE;

-- name: lock_endpoint_by_name
-- lock_endpoint for the endpoint named :'name'.
SELECT id::text AS id,
  enabled
FROM webhook_endpoints
WHERE name = :'name'
FOR UPDATE;

-- name: disable_endpoint
-- webhook_endpoint_disable (migration 007): disables the endpoint :'id'
-- with :'reason' (one already disabled keeps its first reason) and moves its
-- pending deliveries that no worker holds under a live lease to the dead
-- letter, with their headers, "endpoint NAME disabled: REASON"; returns how
-- many moved.
SELECT webhook_endpoint_disable(:'id', :'reason') AS moved;

-- name: pending_deliveries
-- How many pending deliveries the endpoint :'id' has, those under a lease
-- included.
SELECT count(*) AS n
FROM webhook_outbox
WHERE NOT processed AND endpoint_id = :'id';

-- name: remove_deliveries
-- Dead-letters every pending delivery of the endpoint :'id' (named :'name'),
-- those under a lease included (the endpoint is going away: a worker's
-- late outcome for one is refused by the fence), with its event, endpoint,
-- headers and place in its lane, "endpoint NAME removed".
WITH moved AS (
  DELETE FROM webhook_outbox
  WHERE NOT processed AND endpoint_id = :'id'
  RETURNING delivery_id, event_type, payload, headers, endpoint_id, attempt, ordering_key, ordering_seq
)
INSERT INTO webhook_dead_letter (delivery_id, event_type, payload, headers, endpoint_id, attempts, last_status, last_error,
  ordering_key, ordering_seq, order_broken)
SELECT delivery_id, event_type, payload, headers, endpoint_id, attempt - 1, NULL, left(format('endpoint %s removed', :'name'::text), 512),
  ordering_key, ordering_seq, ordering_key IS NOT NULL
FROM moved;

-- name: remove_endpoint
-- Deletes the endpoint :'id'. Its pending rows would go with it (the foreign
-- key's ON DELETE CASCADE; remove_deliveries has moved them already); its
-- history (processed rows, attempts) stays until retention drops its
-- partition (migration 013).
DELETE FROM webhook_endpoints
WHERE id = :'id';
