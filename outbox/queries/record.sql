-- The record: the outcomes of a batch of deliveries, written in one
-- statement (ARCHITECTURE.md, "The record").

-- name: record
-- Writes the outcomes of a batch whose deliveries all have rows of their
-- own, and returns the ids of the rows it wrote (those still held under
-- their outcome's token). The outcomes come as parallel arrays, one element
-- an outcome; own are their ids (as ids), which keeps every plan on the
-- primary key. ARCHITECTURE.md, "The record", says what each step does.
WITH r AS (
  SELECT *
  FROM unnest(:'ids'::bigint[], :'tokens'::uuid[], :'kinds'::text[], :'attempts'::int[], :'delays_ms'::bigint[], :'statuses'::int[],
    :'errors'::text[], :'healths'::text[], :'started'::timestamptz[], :'took_ms'::float8[], :'try_classes'::text[], :'try_errors'::text[],
    :'marks'::boolean[])
    AS r(id, token, kind, attempt, delay_ms, status, error, health, started, took_ms, try_class, try_error, mark)
), released AS (
  UPDATE webhook_outbox o
  SET locked_until = NULL,
    lease_token = NULL
  FROM r
  WHERE r.kind = 'release' AND o.id = ANY(:'own') AND o.id = r.id AND o.lease_token = r.token AND NOT o.processed
  RETURNING o.id
), deferred AS (
  UPDATE webhook_outbox o
  SET created_at = clock_timestamp() + r.delay_ms * interval '1 millisecond',
    locked_until = NULL,
    lease_token = NULL
  FROM r
  WHERE r.kind = 'defer' AND o.id = ANY(:'own') AND o.id = r.id AND o.lease_token = r.token AND NOT o.processed
  RETURNING o.id
), marked AS (
  UPDATE webhook_outbox o
  SET processed = true,
    processed_at = now()
  FROM r
  -- (own empty, as in a batch of fan-outs in flight alone: nothing is joined)
  WHERE cardinality(:'own'::bigint[]) > 0 AND r.mark AND o.id = ANY(:'own') AND o.id = r.id AND o.lease_token = r.token AND NOT o.processed
  RETURNING o.id, o.delivery_id, o.event_type, o.payload, o.endpoint_id, o.fanout, o.headers, o.ordering_key, o.ordering_seq,
    r.kind, r.attempt, r.delay_ms, r.status, r.error, r.health,
    o.attempt AS made, r.started, r.took_ms, r.try_class, r.try_error
), ended AS (
  SELECT id, delivery_id, event_type, payload, endpoint_id, fanout, headers, ordering_key, ordering_seq,
    kind, attempt, delay_ms, status, error, health, made, started, took_ms, try_class, try_error
  FROM marked
), tried AS (
  INSERT INTO webhook_attempts (delivery_id, endpoint_id, attempt, started_at, duration_ms, status, error_class, error)
  SELECT delivery_id, endpoint_id, made, coalesce(started, clock_timestamp()), took_ms, NULLIF(status, 0),
    NULLIF(try_class, ''), NULLIF(try_error, '')
  FROM ended
  WHERE health <> ''
), requeued AS (
  INSERT INTO webhook_outbox (delivery_id, event_type, payload, attempt, created_at, endpoint_id, fanout, headers,
    ordering_key, ordering_seq)
  SELECT delivery_id, event_type, payload, attempt, clock_timestamp() + delay_ms * interval '1 millisecond', endpoint_id,
    fanout, headers, ordering_key, ordering_seq
  FROM ended
  WHERE kind = 'retry'
), dead AS (
  INSERT INTO webhook_dead_letter (delivery_id, event_type, payload, headers, endpoint_id, attempts, last_status, last_error,
    ordering_key, ordering_seq, order_broken)
  SELECT m.delivery_id, m.event_type, m.payload, m.headers, m.endpoint_id, m.attempt, NULLIF(m.status, 0), m.error,
    m.ordering_key, m.ordering_seq, m.ordering_key IS NOT NULL AND e.ordering IS DISTINCT FROM 'hold'
  FROM ended m
  LEFT JOIN webhook_endpoints e ON m.ordering_key IS NOT NULL AND e.id = m.endpoint_id
  WHERE m.kind = 'dead'
  RETURNING CASE WHEN NOT starts_with(event_type, 'fluxora.') THEN webhook_exhausted_event(id, :'console_url') END
), health AS (
  SELECT endpoint_id,
    bool_or(health = 'healthy') AS ok,
    max(error) FILTER (WHERE health = 'failing') AS error,
    max(NULLIF(status, 0)) FILTER (WHERE health = 'failing') AS status
  FROM ended
  WHERE endpoint_id IS NOT NULL AND health <> ''
  GROUP BY endpoint_id
), endpoints AS (
  UPDATE webhook_endpoints e
  SET failing_since = CASE WHEN h.ok THEN NULL ELSE coalesce(e.failing_since, now()) END,
    last_error = CASE WHEN h.ok THEN e.last_error ELSE h.error END,
    last_status = CASE WHEN h.ok THEN e.last_status ELSE h.status END,
    last_error_at = CASE WHEN h.ok THEN e.last_error_at ELSE now() END
  FROM health h
  WHERE e.id = h.endpoint_id
    AND CASE WHEN h.ok THEN e.failing_since IS NOT NULL
      ELSE e.failing_since IS NULL OR e.last_error_at IS NULL OR e.last_error_at < now() - interval '1 second' END
  RETURNING CASE WHEN h.ok OR e.failing_since = now() THEN webhook_health_event(e, h.ok, :'console_url') END
)
SELECT id
FROM marked
UNION ALL
SELECT id
FROM released
UNION ALL
SELECT id
FROM deferred;
