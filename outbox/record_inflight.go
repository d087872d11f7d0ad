package outbox

// RecordFanSQL is RecordSQL for a batch with outcomes of deliveries
// without rows of their own (fan-outs in flight, migration 018):
// @event_of and @endpoint_of give each outcome's event and endpoint (0 and
// "" for an outcome of a row), @events the events once each, @own the ids
// of the outcomes of rows (a probe of the primary key for the others'
// would find nothing: a seventh of a batch's time). held locks the events
// still held under the outcomes' tokens (the fence); lz_rows writes each
// such delivery's row where it ends (in the history when delivered,
// retried or dead-lettered, pending and unleased when released or
// deferred), but for an endpoint removed since (its rows went with it);
// lz_events adds their endpoints to their events' fan_done and marks an
// event processed, with fanout the size of its fan_to, with the last of
// them. Their ended rows follow the same way as marked's (attempts, retry
// rows, dead letters, endpoints' health).
const RecordFanSQL = `WITH r AS (
  ` + recordArrays + `, @event_of::bigint[], @endpoint_of::text[])
    AS r(` + recordColumns + `, event, endpoint)
), held AS (
  SELECT o.id, o.lease_token, o.delivery_id, o.event_type, o.payload, o.headers, o.created_at
  FROM webhook_outbox o
  WHERE NOT o.processed AND o.id = ANY(@events)
  FOR UPDATE
), lz AS (
  SELECT r.id, md5(h.delivery_id::text || '/' || r.endpoint)::uuid AS delivery_id, h.event_type, h.payload, r.endpoint::uuid AS endpoint_id,
    NULL::int AS fanout, h.headers, NULL::text AS ordering_key, NULL::bigint AS ordering_seq,
    r.kind, r.attempt, r.delay_ms, r.status, r.error, r.health, 1 AS made, r.started, r.took_ms, r.try_class, r.try_error,
    r.mark, r.event, h.created_at AS due
  FROM r JOIN held h ON h.id = r.event AND h.lease_token = r.token
), lz_rows AS (
  INSERT INTO webhook_outbox (id, delivery_id, event_type, payload, attempt, created_at, endpoint_id, headers, processed, processed_at)
  SELECT l.id, l.delivery_id, l.event_type, l.payload, 1,
    CASE WHEN l.kind = 'defer' THEN clock_timestamp() + l.delay_ms * interval '1 millisecond' ELSE l.due END,
    l.endpoint_id, l.headers, l.mark, CASE WHEN l.mark THEN now() END
  FROM lz l
  WHERE EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.id = l.endpoint_id)
), lz_events AS (
  UPDATE webhook_outbox o
  SET fan_done = coalesce(o.fan_done, '{}') || d.eps,
    processed = coalesce(coalesce(cardinality(o.fan_done), 0) + cardinality(d.eps) >= cardinality(o.fan_to), false),
    processed_at = CASE WHEN coalesce(cardinality(o.fan_done), 0) + cardinality(d.eps) >= cardinality(o.fan_to) THEN now() END,
    fanout = CASE WHEN coalesce(cardinality(o.fan_done), 0) + cardinality(d.eps) >= cardinality(o.fan_to) THEN cardinality(o.fan_to) END
  FROM (SELECT event, array_agg(endpoint_id) AS eps FROM lz GROUP BY event) d
  WHERE NOT o.processed AND o.id = ANY(@events) AND o.id = d.event
)` + recordOwnRows + `, ended AS (
  ` + endedOwn + `
  UNION ALL
  SELECT ` + endedColumns + ` FROM lz WHERE mark
)` + recordEnded + `
SELECT id FROM marked UNION ALL SELECT id FROM released UNION ALL SELECT id FROM deferred UNION ALL SELECT id FROM lz`
