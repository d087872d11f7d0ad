-- The ordering lanes of a record that moves keyed rows (migration 015): the
-- lanes locked before the record, and moved on after it, in the same
-- transaction and round trip (ARCHITECTURE.md, "The record").

-- name: lock_lanes
-- Locks the lanes of endpoints ('' for the WEBHOOK_URL endpoint) and keys,
-- side by side, in order, so that two records never wait on each other, and
-- sets fluxora.lanes for the transaction, so that the per-row trigger
-- webhook_ordering_leave stands aside for promote.
WITH locked AS (
  SELECT 1 AS one
  FROM webhook_ordering_lanes l
  WHERE (l.endpoint_id, l.ordering_key) IN (
    SELECT coalesce(nullif(x.e, '')::uuid, webhook_ordering_nil()), x.k
    FROM unnest(:'endpoints'::text[], :'keys'::text[]) AS x(e, k))
  ORDER BY l.endpoint_id, l.ordering_key
  FOR NO KEY UPDATE OF l
)
SELECT set_config('fluxora.lanes', 'record', true) AS lanes,
  (SELECT count(*) FROM locked) AS locked;

-- name: promote
-- Makes the oldest waiting row of each lane of endpoints and keys (as
-- lock_lanes's) its head, unless the lane has one (a retry's new row, or a
-- row whose outcome the fence refused) or a dead letter holds it ('hold').
-- It runs after the record, in the same transaction, and sees what it did.
WITH lanes AS (
  SELECT DISTINCT nullif(x.e, '')::uuid AS endpoint_id, x.k AS ordering_key
  FROM unnest(:'endpoints'::text[], :'keys'::text[]) AS x(e, k)
)
UPDATE webhook_outbox o
SET held = false
FROM (
  SELECT (SELECT w.id
          FROM webhook_outbox w
          WHERE NOT w.processed AND w.endpoint_id = l.endpoint_id AND w.ordering_key = l.ordering_key AND w.held
          ORDER BY w.ordering_seq
          LIMIT 1) AS id
  FROM lanes l
  WHERE l.endpoint_id IS NOT NULL
    AND NOT EXISTS (SELECT 1
                    FROM webhook_outbox h
                    WHERE NOT h.processed AND h.endpoint_id = l.endpoint_id AND h.ordering_key = l.ordering_key AND NOT h.held)
    AND NOT EXISTS (SELECT 1
                    FROM webhook_dead_letter d
                    WHERE d.endpoint_id = l.endpoint_id AND d.ordering_key = l.ordering_key AND NOT d.order_broken
                      AND NOT d.fan_out)
  UNION ALL
  SELECT (SELECT w.id
          FROM webhook_outbox w
          WHERE NOT w.processed AND w.endpoint_id IS NULL AND w.fanout IS NOT NULL AND w.ordering_key = l.ordering_key
            AND w.held
          ORDER BY w.ordering_seq
          LIMIT 1) AS id
  FROM lanes l
  WHERE l.endpoint_id IS NULL
    AND NOT EXISTS (SELECT 1
                    FROM webhook_outbox h
                    WHERE NOT h.processed AND h.endpoint_id IS NULL AND h.fanout IS NOT NULL AND h.ordering_key = l.ordering_key
                      AND NOT h.held)
    AND NOT EXISTS (SELECT 1
                    FROM webhook_dead_letter d
                    WHERE d.endpoint_id IS NULL AND d.ordering_key = l.ordering_key AND NOT d.order_broken AND NOT d.fan_out)
) nx
WHERE NOT o.processed AND o.id = nx.id;

-- name: prune_lanes
-- If it gets the lock :'lock_key', looks at the :'limit' lanes after
-- (:'after_endpoint', :'after_key') (NULL: from the first) and removes those
-- untouched for :'idle_ms' milliseconds with nothing pending and no dead
-- letter holding them (webhook_ordering_prune, migration 026: locked as
-- producers lock them, their sequences kept in their floors). Returns
-- whether it got the lock, how many it removed, and the last lane it
-- looked at (NULL: it reached the end).
WITH lock AS MATERIALIZED (
  SELECT pg_try_advisory_xact_lock(:'lock_key') AS got
), pruned AS MATERIALIZED (
  SELECT p.removed,
    p.last_endpoint,
    p.last_key
  FROM lock l
  CROSS JOIN LATERAL webhook_ordering_prune(
    :'idle_ms' * interval '1 millisecond',
    :'after_endpoint'::uuid,
    :'after_key'::text,
    :'limit') p
  WHERE l.got
)
SELECT l.got,
  coalesce(p.removed, 0) AS removed,
  p.last_endpoint::text AS last_endpoint,
  p.last_key
FROM lock l
LEFT JOIN pruned p ON true;
