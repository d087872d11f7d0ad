package outbox

// plainCTE says whether the claim may take the plain path: no enabled
// endpoint in the table (no event fans out to one), and no pending
// delivery of an endpoint of the table (no queue to schedule).
const plainCTE = `plain AS (
  SELECT NOT EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.enabled)
     AND NOT EXISTS (SELECT 1 FROM webhook_outbox o
                     WHERE NOT o.processed AND o.endpoint_id IS NOT NULL AND NOT o.held) AS ok
)`

// PlainClaimSQL is ClaimSQL for a worker whose only endpoint is its
// WEBHOOK_URL endpoint, while the table has no enabled endpoint and no
// endpoint's pending delivery (plainCTE, checked in the statement itself):
// each event is then its own one delivery, and what ClaimSQL decides comes
// down to this. The endpoint's due deliveries (a retry, a row given back)
// first, at most @env_room and @limit of them, oldest first; then as many
// events as the room and the limit leave (at least one, as ClaimSQL's
// fan_cap), oldest first, a keyed event only when no older event of its
// key waits for its fan-out, each made the endpoint's delivery (fanout 1)
// and leased while the room lasts. more says, as ClaimSQL's, that the
// deliveries filled the limit below the room, or that the events filled
// what was left and another is due. Its rows are ClaimSQL's columns, and
// plain (the last) is true on each.
//
// When the path is open and nothing is due it returns one row of its own,
// neither leased nor fanned out (no row of a claim is both), which says
// only that (ClaimSQL would take nothing either): the
// store's claim is then this one statement. When the path is not plain it
// takes nothing and returns no row: Store.claim then runs ClaimSQL, which
// says in its own plain column whether the next claim may try this one.
// A sparse stream's claims and empty rechecks are this statement, a
// smaller and cheaper one than ClaimSQL. It is the claim of a drain
// through the WEBHOOK_URL endpoint with none of ClaimSQL's scheduling and
// fan-out steps to run: each is cheap on its own, but together they are a
// good share of a claim that has nothing for them to do.
// TestPlainClaimDecidesAsTheClaim runs both on the same tables. An event
// a fan-out in flight left (fan_to set: its lease ended before every
// outcome was written, under a configuration with endpoints) is not this
// path's: when it locks one it takes nothing and returns no row, and
// ClaimSQL, which does not take its plain branch then either, makes the
// deliveries that event still owes.
const PlainClaimSQL = `WITH ` + plainCTE + `, picked AS (
  SELECT o.id, o.created_at, o.lease_token IS NOT NULL AS reclaimed
  FROM webhook_outbox o
  WHERE (SELECT ok FROM plain) AND @env_room::int > 0
    AND NOT o.processed AND o.endpoint_id IS NULL AND o.fanout IS NOT NULL AND NOT o.held AND ` + dueHead + `
  ORDER BY o.created_at, o.id
  LIMIT least(@env_room::int, @limit::int)
  FOR UPDATE SKIP LOCKED
), locked AS (
  SELECT o.id, o.created_at, o.lease_token IS NOT NULL AS reclaimed, o.fan_to IS NOT NULL AS fanned
  FROM webhook_outbox o
  WHERE (SELECT ok FROM plain) AND @env_room::int > 0
    AND NOT o.processed AND o.endpoint_id IS NULL AND o.fanout IS NULL AND ` + dueHead + `
    AND (o.ordering_key IS NULL OR NOT EXISTS (` + olderKeyedEvent + `))
  ORDER BY o.created_at, o.id
  LIMIT greatest(1, least(@env_room::int, @limit::int) - (SELECT count(*) FROM picked))
  FOR UPDATE SKIP LOCKED
), stray AS (
  SELECT EXISTS (SELECT 1 FROM locked WHERE fanned) AS found
), taken AS (
  SELECT p.id, p.reclaimed, false AS fan, true AS lease FROM picked p WHERE NOT (SELECT found FROM stray)
  UNION ALL
  SELECT l.id, l.reclaimed, true,
    row_number() OVER (ORDER BY l.created_at, l.id) <= least(@env_room::int, @limit::int) - (SELECT count(*) FROM picked)
  FROM locked l WHERE NOT (SELECT found FROM stray)
), upd AS (
  UPDATE webhook_outbox o
  SET locked_until = CASE WHEN x.lease THEN now() + @lease_ms * interval '1 millisecond' END,
      lease_token = CASE WHEN x.lease THEN gen_random_uuid() END,
      reclaims = least(o.reclaims::bigint + x.reclaimed::int, 2147483647)::int,
      fanout = CASE WHEN x.fan THEN 1 ELSE o.fanout END
  FROM taken x
  WHERE NOT o.processed AND o.id = ANY(ARRAY(SELECT id FROM taken)) AND o.id = x.id
  RETURNING o.id, o.lease_token, o.delivery_id, o.event_type, o.payload, o.headers, o.attempt, o.created_at, x.reclaimed,
    x.fan, o.fanout, o.ordering_key, o.ordering_seq
), more AS (
  SELECT (SELECT count(*) FROM picked) = @limit::int AND @limit::int < @env_room::int
      OR (SELECT count(*) FROM locked) = greatest(1, least(@env_room::int, @limit::int) - (SELECT count(*) FROM picked)) AND coalesce((
        SELECT true FROM webhook_outbox o
        WHERE NOT o.processed AND o.endpoint_id IS NULL AND o.fanout IS NULL AND ` + dueHead + `
          AND o.id <> ALL(ARRAY(SELECT id FROM locked))
        ORDER BY o.created_at, o.id LIMIT 1), false) AS more
)
SELECT u.id, coalesce(u.lease_token, '00000000-0000-0000-0000-000000000000'::uuid), u.delivery_id::text,
  u.event_type, CASE WHEN u.lease_token IS NULL THEN NULL ELSE u.payload::text END,
  CASE WHEN u.lease_token IS NULL THEN NULL ELSE u.headers::text END, u.attempt, u.created_at, u.reclaimed,
  '', '', '', '', true, '', 0, '', NULL::timestamptz,
  u.lease_token IS NOT NULL, u.fan, coalesce(u.fanout, 0), false, m.more,
  CASE WHEN u.lease_token IS NULL THEN '' ELSE coalesce(u.ordering_key, '') END, coalesce(u.ordering_seq, 0), true, 0::bigint
FROM upd u CROSS JOIN more m
UNION ALL
SELECT 0::bigint, '00000000-0000-0000-0000-000000000000'::uuid, '', '', NULL::text, NULL::text, 0, NULL::timestamptz, false,
  '', '', '', '', true, '', 0, '', NULL::timestamptz, false, false, 0, false, false, '', 0::bigint, true, 0::bigint
WHERE (SELECT ok FROM plain) AND NOT (SELECT found FROM stray) AND NOT EXISTS (SELECT 1 FROM upd)`
