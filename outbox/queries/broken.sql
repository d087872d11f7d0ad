-- The rows a claim returned that the worker cannot decode.

-- name: dead_letter_broken
-- Moves the rows of :'broken' (a JSON array of {"id", "token", "reason"}) to
-- the dead letter, each with its reason, where the caller's lease still
-- holds them (the fence): one statement, so the mark and the dead letter
-- commit together. created_at is brought into the schema's range, so that
-- the mark passes the time constraints of migration 009 should they not be
-- validated yet. A keyed row's lane moves on without it (order_broken).
WITH broken AS (
  SELECT b.id,
    b.token,
    b.reason
  FROM jsonb_to_recordset(:'broken'::jsonb) AS b(id bigint, token uuid, reason text)
), moved AS (
  UPDATE webhook_outbox o
  SET processed = true,
    processed_at = now(),
    locked_until = NULL,
    created_at = webhook_time_clamp(o.created_at)
  FROM broken b
  WHERE o.id = b.id
    AND o.lease_token = b.token
    AND NOT o.processed
  RETURNING o.delivery_id,
    o.event_type,
    o.payload,
    o.attempt,
    o.endpoint_id,
    o.headers,
    b.reason,
    o.ordering_key,
    o.ordering_seq
)
INSERT INTO webhook_dead_letter (delivery_id, event_type, payload, headers, endpoint_id, attempts, last_status, last_error,
  ordering_key, ordering_seq, order_broken)
SELECT delivery_id,
  event_type,
  payload,
  headers,
  endpoint_id,
  attempt - 1,
  NULL,
  left(reason, 512),
  ordering_key,
  ordering_seq,
  ordering_key IS NOT NULL
FROM moved;
