-- The dispatcher's sleep: when the next scheduled row falls due.

-- name: next_due
-- The milliseconds, by the database clock, until the earliest pending row
-- that is not yet due (NULL when there is none): one probe of
-- webhook_outbox_queue_idx per endpoint with pending rows (a loose index
-- scan, as the claim lists its queues; ARCHITECTURE.md, "The claim"), one
-- of the events and one of the WEBHOOK_URL endpoint's deliveries.
WITH heads AS (
  SELECT (SELECT min(o.created_at)
          FROM webhook_outbox o
          WHERE NOT o.processed AND o.endpoint_id = q.endpoint_id AND NOT o.held AND o.created_at > now()) AS at
  FROM webhook_queues() q(endpoint_id)
  UNION ALL
  SELECT min(o.created_at)
  FROM webhook_outbox o
  WHERE NOT o.processed AND o.endpoint_id IS NULL AND o.fanout IS NULL AND o.created_at > now()
  UNION ALL
  SELECT min(o.created_at)
  FROM webhook_outbox o
  WHERE NOT o.processed AND o.endpoint_id IS NULL AND o.fanout IS NOT NULL AND NOT o.held AND o.created_at > now()
)
SELECT (EXTRACT(EPOCH FROM (min(at) - clock_timestamp())) * 1000)::bigint AS ms
FROM heads;
