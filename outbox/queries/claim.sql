-- The claim: three statements sent together, in one round trip, and run in
-- one transaction. Each step tells the next what it took through the
-- transaction's setting fluxora.claim (JSON: taken, env, rooms, events), so
-- that together they stay within :'limit' and each endpoint's room. Each runs
-- alone in psql too: without the setting, a step has the whole budget.
-- ARCHITECTURE.md, "The claim", says why each is shaped as it is.

-- name: claim_queues
-- Leases the due deliveries of the endpoints' queues, and says whether an
-- event is due (events_due) and whether a queue holds a delivery, due or
-- not (queued; a row of state 'status' says both when it leased none), so
-- that a claim may leave out the steps with nothing to do. It lists the
-- endpoints with pending deliveries (a loose index scan), keeps those not
-- in :'skip' whose head is due (the :'limit' oldest heads), takes from each
-- at most its room and an equal share of :'limit' (of what the queues with
-- less room than that leave), oldest first, and interleaves them round
-- robin; the WEBHOOK_URL endpoint's deliveries are one more queue.
WITH told AS (
  SELECT coalesce(nullif(current_setting('fluxora.claim', true), '')::jsonb, '{}') AS t
), heads AS (
  SELECT q.endpoint_id,
    webhook_flow_room(d.t -> 'grant', q.endpoint_id, coalesce((:'room'::jsonb ->> q.endpoint_id::text)::int, :'default_room'::int)) AS room,
    (SELECT o.created_at
     FROM webhook_outbox o
     WHERE NOT o.processed AND o.endpoint_id = q.endpoint_id AND NOT o.held
       AND o.created_at <= now() AND (o.locked_until IS NULL OR o.locked_until <= now())
     ORDER BY o.created_at, o.id
     LIMIT 1) AS head
  FROM webhook_queues() q(endpoint_id)
  CROSS JOIN told d
  WHERE q.endpoint_id <> ALL(:'skip'::uuid[])
), ready AS (
  SELECT h.endpoint_id, h.room
  FROM heads h
  WHERE h.head IS NOT NULL AND h.room > 0
  ORDER BY h.head
  LIMIT :'limit'
), env_ready AS (
  SELECT r.room
  FROM (SELECT webhook_flow_room(t -> 'grant', NULL, :'env_room'::int) AS room FROM told) r
  WHERE r.room > 0
    AND (SELECT true
         FROM webhook_outbox o
         WHERE NOT o.processed AND o.endpoint_id IS NULL AND o.fanout IS NOT NULL AND NOT o.held
           AND o.created_at <= now() AND (o.locked_until IS NULL OR o.locked_until <= now())
         ORDER BY o.created_at, o.id
         LIMIT 1)
), share AS (
  SELECT greatest(1, max(e.even), ceil((:'limit'::numeric - coalesce(sum(r.room) FILTER (WHERE r.room < e.even), 0))
    / greatest(1, count(*) FILTER (WHERE r.room >= e.even))))::int AS n
  FROM (SELECT room FROM ready UNION ALL SELECT room FROM env_ready) r
  CROSS JOIN (SELECT ceil(:'limit'::numeric / greatest(1, (SELECT count(*) FROM ready) + (SELECT count(*) FROM env_ready))) AS even) e
), picked AS (
  SELECT c.id, r.endpoint_id, c.created_at, c.reclaimed, r.room,
    row_number() OVER (PARTITION BY r.endpoint_id ORDER BY c.created_at, c.id) AS rn
  FROM ready r
  CROSS JOIN share s
  CROSS JOIN LATERAL (
    SELECT *
    FROM (SELECT o.id, o.created_at, o.lease_token IS NOT NULL AS reclaimed
          FROM webhook_outbox o
          WHERE NOT o.processed AND o.endpoint_id = r.endpoint_id AND NOT o.held
            AND o.created_at <= now() AND (o.locked_until IS NULL OR o.locked_until <= now())
          ORDER BY o.created_at, o.id
          LIMIT least(r.room, s.n)
          FOR UPDATE SKIP LOCKED) x
    LIMIT :'limit') c
  UNION ALL
  SELECT c.id, NULL::uuid, c.created_at, c.reclaimed, r.room,
    row_number() OVER (ORDER BY c.created_at, c.id)
  FROM env_ready r
  CROSS JOIN share s
  CROSS JOIN LATERAL (
    SELECT *
    FROM (SELECT o.id, o.created_at, o.lease_token IS NOT NULL AS reclaimed
          FROM webhook_outbox o
          WHERE NOT o.processed AND o.endpoint_id IS NULL AND o.fanout IS NOT NULL AND NOT o.held
            AND o.created_at <= now() AND (o.locked_until IS NULL OR o.locked_until <= now())
          ORDER BY o.created_at, o.id
          LIMIT least(r.room, s.n)
          FOR UPDATE SKIP LOCKED) x
    LIMIT :'limit') c
), chosen AS (
  SELECT *
  FROM picked
  ORDER BY rn, created_at, id
  LIMIT :'limit'
), leased AS (
  UPDATE webhook_outbox o
  SET locked_until = now() + :'lease_ms' * interval '1 millisecond',
    lease_token = gen_random_uuid(),
    reclaims = least(o.reclaims::bigint + c.reclaimed::int, 2147483647)::int
  FROM chosen c
  WHERE NOT o.processed AND o.id = ANY(ARRAY(SELECT id FROM chosen)) AND o.id = c.id
  RETURNING o.*, c.reclaimed
), status AS (
  SELECT (SELECT count(*) FROM picked) > (SELECT count(*) FROM chosen)
      OR (SELECT count(*) FROM heads WHERE head IS NOT NULL AND room > 0) > (SELECT count(*) FROM ready)
      OR EXISTS (SELECT 1 FROM picked p, share s WHERE p.rn = s.n AND s.n < p.room) AS more,
    coalesce((SELECT true
              FROM webhook_outbox o
              WHERE NOT o.processed AND o.endpoint_id IS NULL AND o.fanout IS NULL
                AND o.created_at <= now() AND (o.locked_until IS NULL OR o.locked_until <= now())
              ORDER BY o.created_at, o.id
              LIMIT 1), false) AS events_due,
    EXISTS (SELECT 1 FROM webhook_queues() q) OR :'env'::boolean AND EXISTS (
      SELECT 1 FROM webhook_outbox o WHERE NOT o.processed AND o.endpoint_id IS NULL AND o.fanout IS NOT NULL AND NOT o.held) AS queued,
    set_config('fluxora.claim', ((SELECT t FROM told) || jsonb_build_object(
      'taken', (SELECT count(*) FROM chosen),
      'env', (SELECT count(*) FROM chosen WHERE endpoint_id IS NULL),
      'rooms', (SELECT coalesce(jsonb_object_agg(endpoint_id, n), '{}')
                FROM (SELECT endpoint_id, count(*) AS n FROM chosen WHERE endpoint_id IS NOT NULL GROUP BY endpoint_id) r),
      'leased', (SELECT coalesce(jsonb_agg(jsonb_build_array(webhook_flow_key(c.endpoint_id), c.id)), '[]')
                 FROM chosen c, told WHERE t -> 'grant' ? webhook_flow_key(c.endpoint_id))))::text, true) AS said
)
SELECT u.id, u.lease_token, u.delivery_id::text AS delivery_id, u.event_type, u.payload::text AS payload, u.headers::text AS headers,
  u.attempt, u.created_at, u.reclaimed, coalesce(u.ordering_key, '') AS ordering_key, coalesce(u.ordering_seq, 0) AS ordering_seq,
  0::bigint AS event, 'queue' AS state, 0 AS fanout,
  coalesce(u.endpoint_id::text, '') AS endpoint_id, coalesce(e.name, '') AS endpoint_name, coalesce(e.url, '') AS url,
  coalesce(e.secret, '') AS secret, coalesce(e.enabled, true) AS enabled, coalesce(e.disabled_reason, '') AS disabled_reason,
  coalesce(e.retry_rps, 0) AS retry_rps,
  CASE WHEN e.secret_previous_until > now() THEN e.secret_previous ELSE '' END AS previous_secret,
  CASE WHEN e.secret_previous_until > now() THEN e.secret_previous_until END AS previous_until,
  t.more, NOT EXISTS (SELECT 1 FROM heads h WHERE h.head IS NOT NULL) AS plain, t.events_due, t.queued
FROM leased u
CROSS JOIN status t
LEFT JOIN webhook_endpoints e ON e.id = u.endpoint_id
UNION ALL
SELECT 0, '00000000-0000-0000-0000-000000000000', '', '', NULL, NULL, 1, NULL, false, '', 0, 0, 'status', 0,
  '', '', '', '', true, '', 0, '', NULL, t.more, NOT EXISTS (SELECT 1 FROM heads h WHERE h.head IS NOT NULL), t.events_due, t.queued
FROM status t
WHERE NOT EXISTS (SELECT 1 FROM leased);

-- name: claim_events
-- Takes the oldest due events (at least one, as many as the budget left
-- can deliver), a keyed event only when no older event of its key waits.
-- Who takes an event is webhook_takes's (030: webhook_subscribed's, 024,
-- and the endpoint's payload filter). An event no endpoint of the table
-- takes (none subscribed, or no filter matched) is done here: the
-- WEBHOOK_URL endpoint's delivery (:'env': leased while its room and the
-- budget last) or unrouted, as a fluxora. event always is (the WEBHOOK_URL
-- endpoint never takes one). The others are kept, locked, for
-- claim_fan_out (state to_fan_out): their ids go into fluxora.claim.
-- While the WEBHOOK_URL endpoint is skipped it locks events only when one
-- of the oldest it may take fans out to an endpoint of the table: the
-- others would only become that endpoint's pending deliveries, each
-- written twice. It says, as claim_queues does, whether a queue holds a
-- delivery (queued, also in fluxora.claim), so that a claim may leave
-- claim_queues out while none does; a row of state 'status' says it when
-- it took no event.
WITH told AS (
  SELECT coalesce(nullif(current_setting('fluxora.claim', true), '')::jsonb, '{}') AS t
), budget AS (
  SELECT :'limit'::int - coalesce((t ->> 'taken')::int, 0) AS total,
    webhook_flow_room(t -> 'grant', NULL, :'env_room'::int) - coalesce((t ->> 'env')::int, 0) AS env,
    webhook_flow_room(t -> 'grant', NULL, :'env_room'::int) AS env_room,
    t
  FROM told
), cap AS (
  SELECT CASE WHEN :'env'::boolean AND b.env_room <= 0 AND c.enabled = 0 THEN 0
    ELSE greatest(1, least(
      b.total / greatest(1, c.every + (:'env'::boolean AND b.env_room > 0)::int),
      CASE WHEN :'env'::boolean AND b.env_room > 0 THEN b.env END)) END AS n
  FROM budget b
  CROSS JOIN (SELECT count(*) AS enabled,
      count(*) FILTER (WHERE cardinality(e.event_types) = 0 AND e.payload_filter IS NULL AND e.id <> ALL(:'skip'::uuid[])) AS every
    FROM webhook_endpoints e
    WHERE e.enabled) c
), gate AS (
  SELECT NOT :'env'::boolean OR (SELECT env_room FROM budget) > 0 OR EXISTS (
      SELECT 1
      FROM (SELECT o.event_type, o.fan_to, o.payload
            FROM webhook_outbox o
            WHERE NOT o.processed AND o.endpoint_id IS NULL AND o.fanout IS NULL
              AND o.created_at <= now() AND (o.locked_until IS NULL OR o.locked_until <= now())
            ORDER BY o.created_at, o.id
            LIMIT (SELECT n FROM cap)) w
      WHERE w.fan_to IS NOT NULL OR EXISTS (
        SELECT 1
        FROM webhook_endpoints e
        WHERE e.enabled AND webhook_takes(e.event_types, e.payload_filter, w.event_type, w.payload))) AS open
), locked AS (
  SELECT *
  FROM (SELECT o.id, o.event_type, o.payload, o.created_at, o.lease_token IS NOT NULL AS reclaimed, o.fan_to, o.fan_done
        FROM webhook_outbox o
        WHERE (SELECT open FROM gate) AND NOT o.processed AND o.endpoint_id IS NULL AND o.fanout IS NULL
          AND o.created_at <= now() AND (o.locked_until IS NULL OR o.locked_until <= now())
          AND (o.ordering_key IS NULL OR NOT EXISTS (
            SELECT 1
            FROM webhook_outbox p
            WHERE NOT p.processed AND p.endpoint_id IS NULL AND p.fanout IS NULL AND p.ordering_key IS NOT NULL
              AND p.ordering_key = o.ordering_key AND (p.created_at, p.id) < (o.created_at, o.id)))
        ORDER BY o.created_at, o.id
        LIMIT (SELECT n FROM cap)
        FOR UPDATE SKIP LOCKED) l
  LIMIT :'limit'
), sized AS (
  SELECT l.id, l.event_type, l.created_at, l.reclaimed, l.fan_to, l.fan_done, s.targets, row_number() OVER w AS k,
    s.takes + (:'env'::boolean AND (SELECT env_room FROM budget) > 0)::int AS takes,
    sum(s.takes + (:'env'::boolean AND (SELECT env_room FROM budget) > 0)::int) OVER w AS upto
  FROM locked l
  CROSS JOIN LATERAL (
    SELECT count(*) AS targets, count(*) FILTER (WHERE e.id <> ALL(:'skip'::uuid[])) AS takes
    FROM webhook_endpoints e
    WHERE CASE WHEN l.fan_to IS NULL THEN e.enabled AND webhook_takes(e.event_types, e.payload_filter, l.event_type, l.payload)
      ELSE e.id = ANY(l.fan_to) AND e.id <> ALL(coalesce(l.fan_done, '{}')) END) s
  WINDOW w AS (ORDER BY l.created_at, l.id)
), kept AS (
  SELECT s.*, s.fan_to IS NULL AND s.targets = 0 AS simple
  FROM sized s
  WHERE s.k = 1 OR s.upto <= :'limit'
), simple AS (
  SELECT k.id, k.reclaimed, k.env,
    k.env AND row_number() OVER (PARTITION BY k.env ORDER BY k.created_at, k.id) <= least((SELECT env FROM budget), (SELECT total FROM budget)) AS lease
  FROM (SELECT k.*, :'env'::boolean AND NOT starts_with(k.event_type, 'fluxora.') AS env FROM kept k WHERE k.simple) k
), done AS (
  UPDATE webhook_outbox o
  SET locked_until = CASE WHEN x.lease THEN now() + :'lease_ms' * interval '1 millisecond' END,
    lease_token = CASE WHEN x.lease THEN gen_random_uuid() END,
    reclaims = least(o.reclaims::bigint + x.reclaimed::int, 2147483647)::int,
    fanout = x.env::int,
    processed = NOT x.env,
    processed_at = CASE WHEN NOT x.env THEN now() END
  FROM simple x
  WHERE NOT o.processed AND o.id = ANY(ARRAY(SELECT id FROM simple)) AND o.id = x.id
  RETURNING o.*, x.reclaimed
), queued AS (
  SELECT EXISTS (SELECT 1 FROM webhook_outbox o WHERE NOT o.processed AND o.endpoint_id IS NOT NULL AND NOT o.held)
      OR :'env'::boolean AND (EXISTS (SELECT 1 FROM done WHERE NOT processed) OR EXISTS (
        SELECT 1 FROM webhook_outbox o WHERE NOT o.processed AND o.endpoint_id IS NULL AND o.fanout IS NOT NULL AND NOT o.held)) AS found
), told_next AS (
  SELECT (SELECT count(*) FROM locked) > (SELECT count(*) FROM kept)
      OR (SELECT n FROM cap) > 0 AND (SELECT count(*) FROM locked) = (SELECT n FROM cap) AND coalesce((
        SELECT true
        FROM webhook_outbox o
        WHERE NOT o.processed AND o.endpoint_id IS NULL AND o.fanout IS NULL
          AND o.created_at <= now() AND (o.locked_until IS NULL OR o.locked_until <= now())
          AND o.id <> ALL(ARRAY(SELECT id FROM locked))
        ORDER BY o.created_at, o.id
        LIMIT 1), false) AS more,
    :'env'::boolean AND (SELECT env_room FROM budget) > 0 AND NOT EXISTS (SELECT 1 FROM simple WHERE NOT env) AND NOT EXISTS (
      SELECT 1 FROM kept WHERE NOT simple) AS plain,
    (SELECT found FROM queued) AS queued,
    set_config('fluxora.claim', ((SELECT t FROM budget) || jsonb_build_object(
      'queued', (SELECT found FROM queued),
      'taken', coalesce(((SELECT t FROM budget) ->> 'taken')::int, 0) + (SELECT count(*) FROM done WHERE lease_token IS NOT NULL),
      'env', coalesce(((SELECT t FROM budget) ->> 'env')::int, 0) + (SELECT count(*) FROM done WHERE lease_token IS NOT NULL),
      'events', (SELECT coalesce(jsonb_agg(id ORDER BY created_at, id), '[]') FROM kept WHERE NOT simple),
      'leased', coalesce((SELECT t FROM budget) -> 'leased', '[]') || (SELECT coalesce(jsonb_agg(jsonb_build_array(webhook_flow_key(NULL), id)), '[]')
        FROM done WHERE lease_token IS NOT NULL AND (SELECT t FROM budget) -> 'grant' ? webhook_flow_key(NULL))))::text, true) AS said
)
SELECT k.id, coalesce(u.lease_token, '00000000-0000-0000-0000-000000000000') AS lease_token,
  coalesce(u.delivery_id::text, '') AS delivery_id, k.event_type,
  CASE WHEN u.lease_token IS NOT NULL THEN u.payload::text END AS payload,
  CASE WHEN u.lease_token IS NOT NULL THEN u.headers::text END AS headers,
  coalesce(u.attempt, 1) AS attempt, k.created_at, k.reclaimed,
  CASE WHEN u.lease_token IS NOT NULL THEN coalesce(u.ordering_key, '') ELSE '' END AS ordering_key,
  coalesce(u.ordering_seq, 0) AS ordering_seq, 0::bigint AS event,
  CASE WHEN NOT k.simple THEN 'to_fan_out' WHEN u.lease_token IS NOT NULL THEN 'event_leased' ELSE 'event' END AS state,
  coalesce(u.fanout, 0) AS fanout, '' AS endpoint_id, '' AS endpoint_name, '' AS url, '' AS secret, true AS enabled,
  '' AS disabled_reason, 0 AS retry_rps, '' AS previous_secret, NULL::timestamptz AS previous_until,
  t.more, t.plain, true AS events_due, t.queued
FROM kept k
CROSS JOIN told_next t
LEFT JOIN done u ON u.id = k.id
UNION ALL
SELECT 0, '00000000-0000-0000-0000-000000000000', '', '', NULL, NULL, 1, NULL, false, '', 0, 0, 'status', 0,
  '', '', '', '', true, '', 0, '', NULL, t.more, t.plain, t.more, t.queued
FROM told_next t
WHERE NOT EXISTS (SELECT 1 FROM kept);

-- name: claim_fan_out
-- Fans out the events claim_events kept (fluxora.claim's events): one
-- delivery for each enabled endpoint that takes the event (webhook_takes:
-- its type subscribed, its payload filter matched; for an event whose
-- fan-out in flight was cut short: each endpoint of fan_to not in
-- fan_done), made leased when it fits (its endpoint's room and the
-- budget left, oldest event first), else pending; with :'env' the event's
-- own row is the WEBHOOK_URL endpoint's delivery, but for a fluxora. event
-- (processed once fanned out). Without :'env', an event
-- without an ordering key whose every delivery fits is not given rows: it
-- is leased whole, a fan-out in flight (fan_to), and its deliveries come
-- with its id in event, their rows written with their outcomes. queued
-- says what claim_events said, or that this step gave a queue a row.
WITH told AS (
  SELECT coalesce(nullif(current_setting('fluxora.claim', true), '')::jsonb, '{}') AS t
), ev AS (
  SELECT o.id, o.event_type, o.payload, o.created_at, o.ordering_key, o.fan_to, o.fan_done, o.lease_token IS NOT NULL AS reclaimed,
    :'env'::boolean AND NOT starts_with(o.event_type, 'fluxora.') AS env
  FROM webhook_outbox o
  WHERE NOT o.processed AND o.endpoint_id IS NULL AND o.fanout IS NULL
    AND o.id = ANY(ARRAY(SELECT jsonb_array_elements_text(t -> 'events')::bigint FROM told))
), targets AS (
  SELECT ev.id AS event_id, ev.created_at, e.id AS endpoint_id
  FROM ev
  JOIN webhook_endpoints e ON CASE WHEN ev.fan_to IS NULL
    THEN e.enabled AND webhook_takes(e.event_types, e.payload_filter, ev.event_type, ev.payload)
    ELSE e.id = ANY(ev.fan_to) AND e.id <> ALL(coalesce(ev.fan_done, '{}')) END
  UNION ALL
  SELECT ev.id, ev.created_at, NULL::uuid
  FROM ev
  WHERE ev.env
), offers AS (
  SELECT x.event_id, x.endpoint_id, x.created_at,
    row_number() OVER (PARTITION BY x.endpoint_id ORDER BY x.created_at, x.event_id) <= CASE
      WHEN x.endpoint_id IS NULL THEN webhook_flow_room(d.t -> 'grant', NULL, :'env_room'::int) - coalesce((d.t ->> 'env')::int, 0)
      WHEN x.endpoint_id = ANY(:'skip'::uuid[]) THEN 0
      ELSE webhook_flow_room(d.t -> 'grant', x.endpoint_id, coalesce((:'room'::jsonb ->> x.endpoint_id::text)::int, :'default_room'::int))
        - coalesce((d.t -> 'rooms' ->> x.endpoint_id::text)::int, 0)
    END AS roomy
  FROM targets x
  CROSS JOIN told d
), fits AS (
  SELECT f.event_id, f.endpoint_id,
    f.roomy AND row_number() OVER (PARTITION BY f.roomy ORDER BY f.created_at, f.event_id, f.endpoint_id)
      <= :'limit'::int - coalesce(((SELECT t FROM told) ->> 'taken')::int, 0) AS lease
  FROM offers f
), lazy AS (
  SELECT f.event_id AS id, array_agg(f.endpoint_id) AS eps
  FROM fits f
  JOIN ev ON ev.id = f.event_id
  WHERE NOT :'env'::boolean AND ev.ordering_key IS NULL AND ev.fan_to IS NULL
    AND webhook_time_clamp(ev.created_at) = ev.created_at
  GROUP BY f.event_id
  HAVING bool_and(f.lease AND NOT coalesce((SELECT t FROM told) -> 'grant' ? webhook_flow_key(f.endpoint_id), false))
), fanned AS (
  INSERT INTO webhook_outbox (delivery_id, event_type, payload, created_at, endpoint_id, headers, ordering_key, locked_until, lease_token)
  SELECT md5(o.delivery_id::text || '/' || f.endpoint_id::text)::uuid, o.event_type, o.payload, o.created_at, f.endpoint_id,
    o.headers, o.ordering_key,
    CASE WHEN f.lease THEN now() + :'lease_ms' * interval '1 millisecond' END,
    CASE WHEN f.lease THEN gen_random_uuid() END
  FROM fits f
  JOIN webhook_outbox o ON o.id = f.event_id
  WHERE f.endpoint_id IS NOT NULL AND NOT o.processed AND o.id = ANY(ARRAY(SELECT id FROM ev))
    AND f.event_id <> ALL(ARRAY(SELECT id FROM lazy))
  ORDER BY f.endpoint_id, o.ordering_key
  RETURNING *
), taken AS (
  SELECT ev.id, ev.reclaimed, ev.env, coalesce(env.lease, false) OR lz.id IS NOT NULL AS lease, lz.eps,
    (SELECT count(*) FROM targets x WHERE x.event_id = ev.id AND x.endpoint_id IS NOT NULL)::int AS n
  FROM ev
  LEFT JOIN fits env ON env.event_id = ev.id AND env.endpoint_id IS NULL
  LEFT JOIN lazy lz ON lz.id = ev.id
), upd AS (
  UPDATE webhook_outbox o
  SET locked_until = CASE WHEN x.lease THEN now() + :'lease_ms' * interval '1 millisecond' END,
    lease_token = CASE WHEN x.lease THEN gen_random_uuid() END,
    reclaims = least(o.reclaims::bigint + x.reclaimed::int, 2147483647)::int,
    fanout = CASE WHEN x.eps IS NULL THEN coalesce(cardinality(o.fan_to), x.n) + x.env::int END,
    fan_to = coalesce(x.eps, o.fan_to),
    processed = NOT x.env AND x.eps IS NULL,
    processed_at = CASE WHEN NOT x.env AND x.eps IS NULL THEN now() END
  FROM taken x
  WHERE NOT o.processed AND o.id = ANY(ARRAY(SELECT id FROM taken)) AND o.id = x.id
  RETURNING o.*, x.reclaimed, x.eps
), out AS (
  SELECT u.id, u.lease_token, u.delivery_id, u.event_type, u.payload, u.headers, u.attempt, u.created_at, u.reclaimed,
    u.endpoint_id, u.ordering_key, u.ordering_seq, 0::bigint AS event, coalesce(u.fanout, cardinality(u.eps)) AS fanout,
    CASE WHEN u.eps IS NOT NULL THEN 'event_in_flight' WHEN u.lease_token IS NOT NULL THEN 'event_leased' ELSE 'event' END AS state
  FROM upd u
  UNION ALL
  SELECT f.id, f.lease_token, f.delivery_id, f.event_type, f.payload, f.headers, f.attempt, f.created_at, false,
    f.endpoint_id, f.ordering_key, f.ordering_seq, 0, 0, 'fresh'
  FROM fanned f
  WHERE f.lease_token IS NOT NULL
  UNION ALL
  SELECT nextval('webhook_outbox_id_seq'::regclass), u.lease_token, md5(u.delivery_id::text || '/' || f.endpoint_id::text)::uuid,
    u.event_type, NULL, NULL, 1, u.created_at, false, f.endpoint_id, NULL, NULL, u.id, 0, 'fresh'
  FROM upd u
  JOIN fits f ON f.event_id = u.id
  WHERE u.eps IS NOT NULL
), said AS (
  SELECT set_config('fluxora.claim', (SELECT CASE WHEN NOT t ? 'grant' THEN t::text ELSE (t || jsonb_build_object('leased',
      coalesce(t -> 'leased', '[]') || (SELECT coalesce(jsonb_agg(jsonb_build_array(webhook_flow_key(o.endpoint_id), o.id)), '[]')
      FROM out o
      WHERE o.lease_token IS NOT NULL AND o.event = 0 AND o.state <> 'event_in_flight'
        AND t -> 'grant' ? webhook_flow_key(o.endpoint_id))))::text END FROM told), true) AS said
)
SELECT o.id, coalesce(o.lease_token, '00000000-0000-0000-0000-000000000000') AS lease_token, o.delivery_id::text AS delivery_id,
  o.event_type,
  CASE WHEN o.state <> 'event' THEN o.payload::text END AS payload,
  CASE WHEN o.state <> 'event' THEN o.headers::text END AS headers,
  o.attempt, o.created_at, o.reclaimed,
  CASE WHEN o.state IN ('event_leased', 'fresh') THEN coalesce(o.ordering_key, '') ELSE '' END AS ordering_key,
  coalesce(o.ordering_seq, 0) AS ordering_seq, o.event, o.state, o.fanout,
  coalesce(o.endpoint_id::text, '') AS endpoint_id, coalesce(e.name, '') AS endpoint_name, coalesce(e.url, '') AS url,
  coalesce(e.secret, '') AS secret, coalesce(e.enabled, true) AS enabled, coalesce(e.disabled_reason, '') AS disabled_reason,
  coalesce(e.retry_rps, 0) AS retry_rps,
  CASE WHEN e.secret_previous_until > now() THEN e.secret_previous ELSE '' END AS previous_secret,
  CASE WHEN e.secret_previous_until > now() THEN e.secret_previous_until END AS previous_until,
  false AS more, false AS plain, true AS events_due,
  :'env'::boolean OR coalesce(((SELECT t FROM told) ->> 'queued')::boolean, true) OR EXISTS (SELECT 1 FROM fanned) AS queued
FROM out o
LEFT JOIN webhook_endpoints e ON e.id = o.endpoint_id
WHERE (SELECT said FROM said) IS NOT NULL;

-- name: claim_plain
-- The claim of a worker whose events, as far as this claim finds them, go
-- to its WEBHOOK_URL endpoint alone (ARCHITECTURE.md, "The claim"): no
-- endpoint of the table has a delivery this claim could take (one due,
-- not leased, of an endpoint not in :'skip'), and no enabled endpoint of
-- the table takes an event it locks (webhook_takes), and none it locks is a
-- fluxora. event (the steps route those). Each event is then its
-- own one delivery. Where that does not hold it takes nothing and returns
-- no row: the three steps run instead. Open with nothing due, it returns
-- one row of state 'status'.
WITH plain AS (
  SELECT NOT EXISTS (SELECT 1
                     FROM webhook_queues() q(endpoint_id)
                     WHERE q.endpoint_id <> ALL(:'skip'::uuid[])
                       AND (SELECT true
                            FROM webhook_outbox o
                            WHERE NOT o.processed AND o.endpoint_id = q.endpoint_id AND NOT o.held
                              AND o.created_at <= now() AND (o.locked_until IS NULL OR o.locked_until <= now())
                            ORDER BY o.created_at, o.id
                            LIMIT 1))
    AND NOT EXISTS (SELECT 1
                    FROM webhook_flow f
                    WHERE f.endpoint_id = '00000000-0000-0000-0000-000000000000' AND f.paused_until > now()) AS ok
), picked AS (
  SELECT o.id, o.created_at, o.lease_token IS NOT NULL AS reclaimed
  FROM webhook_outbox o
  WHERE (SELECT ok FROM plain) AND :'env_room'::int > 0
    AND NOT o.processed AND o.endpoint_id IS NULL AND o.fanout IS NOT NULL AND NOT o.held
    AND o.created_at <= now() AND (o.locked_until IS NULL OR o.locked_until <= now())
  ORDER BY o.created_at, o.id
  LIMIT least(:'env_room'::int, :'limit'::int)
  FOR UPDATE SKIP LOCKED
), locked AS (
  SELECT o.id, o.created_at, o.lease_token IS NOT NULL AS reclaimed,
    o.fan_to IS NOT NULL OR starts_with(o.event_type, 'fluxora.') OR EXISTS (SELECT 1
                                    FROM webhook_endpoints e
                                    WHERE e.enabled AND webhook_takes(e.event_types, e.payload_filter, o.event_type, o.payload)) AS fans
  FROM webhook_outbox o
  WHERE (SELECT ok FROM plain) AND :'env_room'::int > 0
    AND NOT o.processed AND o.endpoint_id IS NULL AND o.fanout IS NULL
    AND o.created_at <= now() AND (o.locked_until IS NULL OR o.locked_until <= now())
    AND (o.ordering_key IS NULL OR NOT EXISTS (
      SELECT 1
      FROM webhook_outbox p
      WHERE NOT p.processed AND p.endpoint_id IS NULL AND p.fanout IS NULL AND p.ordering_key IS NOT NULL
        AND p.ordering_key = o.ordering_key AND (p.created_at, p.id) < (o.created_at, o.id)))
  ORDER BY o.created_at, o.id
  LIMIT greatest(1, least(:'env_room'::int, :'limit'::int) - (SELECT count(*) FROM picked))
  FOR UPDATE SKIP LOCKED
), stray AS (
  SELECT EXISTS (SELECT 1 FROM locked WHERE fans) AS found
), taken AS (
  SELECT p.id, p.reclaimed, false AS fan, true AS lease
  FROM picked p
  WHERE NOT (SELECT found FROM stray)
  UNION ALL
  SELECT l.id, l.reclaimed, true,
    row_number() OVER (ORDER BY l.created_at, l.id) <= least(:'env_room'::int, :'limit'::int) - (SELECT count(*) FROM picked)
  FROM locked l
  WHERE NOT (SELECT found FROM stray)
), upd AS (
  UPDATE webhook_outbox o
  SET locked_until = CASE WHEN x.lease THEN now() + :'lease_ms' * interval '1 millisecond' END,
    lease_token = CASE WHEN x.lease THEN gen_random_uuid() END,
    reclaims = least(o.reclaims::bigint + x.reclaimed::int, 2147483647)::int,
    fanout = CASE WHEN x.fan THEN 1 ELSE o.fanout END
  FROM taken x
  WHERE NOT o.processed AND o.id = ANY(ARRAY(SELECT id FROM taken)) AND o.id = x.id
  RETURNING o.id, o.lease_token, o.delivery_id, o.event_type, o.payload, o.headers, o.attempt, o.created_at, x.reclaimed,
    x.fan, o.fanout, o.ordering_key, o.ordering_seq
), more AS (
  SELECT (SELECT count(*) FROM picked) = :'limit'::int AND :'limit'::int < :'env_room'::int
      OR (SELECT count(*) FROM locked) = greatest(1, least(:'env_room'::int, :'limit'::int) - (SELECT count(*) FROM picked))
        AND coalesce((SELECT true
                      FROM webhook_outbox o
                      WHERE NOT o.processed AND o.endpoint_id IS NULL AND o.fanout IS NULL
                        AND o.created_at <= now() AND (o.locked_until IS NULL OR o.locked_until <= now())
                        AND o.id <> ALL(ARRAY(SELECT id FROM locked))
                      ORDER BY o.created_at, o.id
                      LIMIT 1), false) AS more
)
SELECT u.id, coalesce(u.lease_token, '00000000-0000-0000-0000-000000000000') AS lease_token, u.delivery_id::text AS delivery_id,
  u.event_type,
  CASE WHEN u.lease_token IS NOT NULL THEN u.payload::text END AS payload,
  CASE WHEN u.lease_token IS NOT NULL THEN u.headers::text END AS headers,
  u.attempt, u.created_at, u.reclaimed,
  CASE WHEN u.lease_token IS NOT NULL THEN coalesce(u.ordering_key, '') ELSE '' END AS ordering_key,
  coalesce(u.ordering_seq, 0) AS ordering_seq, 0::bigint AS event,
  CASE WHEN NOT u.fan THEN 'queue' WHEN u.lease_token IS NOT NULL THEN 'event_leased' ELSE 'event' END AS state,
  coalesce(u.fanout, 0) AS fanout, '' AS endpoint_id, '' AS endpoint_name, '' AS url, '' AS secret, true AS enabled,
  '' AS disabled_reason, 0 AS retry_rps, '' AS previous_secret, NULL::timestamptz AS previous_until,
  m.more, true AS plain, true AS events_due, true AS queued
FROM upd u
CROSS JOIN more m
UNION ALL
SELECT 0, '00000000-0000-0000-0000-000000000000', '', '', NULL, NULL, 1, NULL, false, '', 0, 0, 'status', 0,
  '', '', '', '', true, '', 0, '', NULL, false, true, true, true
WHERE (SELECT ok FROM plain) AND NOT (SELECT found FROM stray) AND NOT EXISTS (SELECT 1 FROM upd);
