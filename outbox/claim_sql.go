package outbox

// dueHead is the predicate of a due row (alias o) beyond its queue's own
// index predicate: its time has come and no live lease holds it.
const dueHead = `o.created_at <= now() AND (o.locked_until IS NULL OR o.locked_until <= now())`

// queuesCTE lists the endpoints that have pending deliveries, one probe of
// webhook_outbox_queue_idx per endpoint (a loose index scan): what it costs
// grows with the endpoints that have rows, never with the rows. The step
// says no "endpoint_id IS NOT NULL" (the strict > implies it, which is
// enough for the partial index): statistics taken while the table held
// only events (or nothing) give that clause no rows, so LIMIT 1 saved the
// index scan nothing and the planner read the whole table once per
// endpoint instead (custom and generic plans alike;
// TestClaimListsQueuesOnTheIndexWithStaleStatistics).
const queuesCTE = `queues(endpoint_id) AS (
  (SELECT o.endpoint_id FROM webhook_outbox o
   WHERE NOT o.processed AND o.endpoint_id IS NOT NULL AND NOT o.held
   ORDER BY o.endpoint_id LIMIT 1)
  UNION ALL
  SELECT (SELECT o.endpoint_id FROM webhook_outbox o
          WHERE NOT o.processed AND o.endpoint_id > q.endpoint_id AND NOT o.held
          ORDER BY o.endpoint_id LIMIT 1)
  FROM queues q WHERE q.endpoint_id IS NOT NULL
)`

// olderKeyedEvent finds, for an event o with an ordering key, an older
// event of the same key still waiting for its fan-out (whoever holds it):
// o waits for it, so that the deliveries of a key's events enter every
// lane in the events' order (migration 015). It is one probe of
// webhook_outbox_keyed_events_idx; the wait lasts as long as a claim.
const olderKeyedEvent = `SELECT 1 FROM webhook_outbox p
      WHERE NOT p.processed AND p.endpoint_id IS NULL AND p.fanout IS NULL AND p.ordering_key IS NOT NULL
        AND p.ordering_key = o.ordering_key AND (p.created_at, p.id) < (o.created_at, o.id)`

// ClaimSQL schedules by endpoint, not by row. It lists the endpoints with
// pending deliveries (queuesCTE), drops those the worker cannot take now
// (@skip: at their limit, or parked while their breaker is open), keeps
// those whose head is due (the @limit whose heads are oldest, when more are
// ready than one claim can serve), and takes from each, through
// webhook_outbox_queue_idx, at most its room (@room, a JSON object of
// endpoint id to free slots, else @default_room) and at most an equal share
// of @limit, oldest first, FOR UPDATE SKIP LOCKED. The rows of all queues
// are then interleaved round robin (each queue's first row, then each
// one's second, …) up to @limit: a healthy endpoint's new event is taken by
// the first claim after it falls due, whatever backlog another endpoint has,
// and the rows of an endpoint the claim skips are not read at all. The
// WEBHOOK_URL endpoint's deliveries (endpoint_id NULL, fanout set) are one
// more queue, taken when @env and @env_room > 0.
//
// Fan-out, in the same statement: the oldest due events (endpoint_id NULL,
// fanout NULL) whose deliveries to endpoints the claim does not skip number
// at most @limit together (always at least one event: fan-out never
// stalls; at most @limit events) get one delivery row per enabled
// endpoint subscribed to their type, due with the event's created_at, with
// a delivery id derived from the event's and the endpoint's and the
// event's headers. So a claim makes about as many deliveries as it may
// lease, whatever each event fans out to: ten events of ten endpoints each
// made a hundred rows in a claim of ten, ninety of them pending for later
// claims (two statements a delivery instead of one). It locks no more
// events than can fit (fan_cap: every event makes a delivery at least for
// each endpoint not skipped subscribed to every type, and for @env, out of
// what @limit leaves after the queue rows chosen, and no more than the
// room @env_room leaves; locking events only to leave them is a
// measurable share of the claim). With @env skipped and no enabled endpoint in the table, it locks
// none: the event row is that endpoint's only delivery, and fanning it out
// unleased would only update it twice (a drain would fan out every event
// ahead of its lease while the endpoint's limit starts below the slots,
// writing each row's WAL twice). When it locked as
// many as can fit, more looks (without a lock, one probe of
// webhook_outbox_events_idx past them) for another due event, so
// that a lone event leased whole does not cost an empty claim; the events
// locked past the budget are left as they were. A delivery that fits (its
// endpoint's room left after the queue rows, and @limit left after every
// queue row and every older delivery that fits its room, oldest event
// first) is inserted leased and returned with the queue rows (fresh): one
// step per event, not one claim per delivery; the others are inserted
// pending, for the next claims. The event's fanout becomes the number of
// deliveries made; with a WEBHOOK_URL endpoint (@env) the event row itself
// is that endpoint's delivery, leased when it fits, else left pending in
// its queue; without one it is marked processed (fanout 0: unrouted). All
// of it commits together or not at all, so an event is never fanned out
// twice or half.
//
// A fan-out in flight (lazy, migration 018): an event without an ordering
// key, claimed for the first time without @env, whose every delivery fits
// is not given rows: its row is leased whole (its fanout stays NULL,
// fan_to lists its endpoints), and each delivery is returned with an id
// from webhook_outbox_id_seq, the event's lease token and the event's id
// (the last column), its payload and headers NULL: they come once, on the
// event's row. RecordSQL writes each delivery's row with its outcome. An
// event whose lease ended before every outcome was written (fan_to set) is
// fanned out again the usual way, rows up front, to the endpoints of
// fan_to not in fan_done, whatever their subscriptions or state are now
// (a disabled endpoint's row is taken and dead-lettered, as any), but
// for those removed since (their rows went with them): a delivery whose
// outcome was written is not made twice, one whose outcome was not is
// not lost; its fanout is fan_to's. Such an event also keeps the claim
// off its plain branch (it is not the WEBHOOK_URL endpoint's alone). A
// lazy event's created_at must be one the worker can read, or its
// deliveries could not be dead-lettered as broken rows.
//
// With only the WEBHOOK_URL endpoint (@env with room, and no enabled
// endpoint in the table: plain), each event is its own one delivery, and
// the fan-out's bookkeeping (subscriptions, budgets, offers, fits) would
// only confirm what fan_cap already decided: the events locked are taken
// as they are, leased while the room lasts, and the rest of the fan-out
// is not run (a gating condition, so not evaluated at all): in a drain
// it would be a good share of every claim's time. The last column, plain, says that, and that no endpoint of
// the table has a pending delivery either: the next claim may then try
// PlainClaimSQL.
//
// A disabled endpoint's rows are still taken (the dispatcher dead-letters
// them with the reason); reclaimed is true for a row whose previous lease
// expired without an outcome, and reclaims saturates rather than fail the
// claim. Every read and write of outbox rows says NOT processed, which
// prunes the plan to the partition webhook_outbox_pending (migration 013)
// at plan time, so that no statement here reads history; marking an event
// processed moves it to its history partition in the same statement.
// "id = ANY(ARRAY(…))" gives the planner an index condition on the
// primary key, whatever the generic plan guesses of the CTEs; a queue's
// due head is a scalar subquery with LIMIT 1, which a generic plan cannot
// turn into a semi-join over every due row of every queue. Each locking
// scan (a queue's, the WEBHOOK_URL endpoint's, the events') also stops at
// @limit, which its own LIMIT never exceeds: the planner takes a LIMIT it
// cannot read for a tenth of the rows, and a custom plan (the pooled path
// plans every claim with its parameters, and cannot turn JIT off) was
// estimated at millions with a real backlog, over jit_above_cost, and a
// short claim spent far longer compiling than running
// (TestClaimCustomPlanStaysUnderTheJITThreshold).
// more says
// that rows were left that this claim could have taken: a queue gave its
// whole share with room left, more queues were ready than served, rows
// were locked and not chosen, or events were left to the next claim's
// fan-out. A rotated endpoint's previous secret is returned only while its
// grace period lasts by the database clock.
const ClaimSQL = `WITH RECURSIVE ` + queuesCTE + `, heads AS (
  SELECT q.endpoint_id, coalesce((@room::jsonb ->> q.endpoint_id::text)::int, @default_room::int) AS room,
         (SELECT o.created_at FROM webhook_outbox o
          WHERE NOT o.processed AND o.endpoint_id = q.endpoint_id AND NOT o.held AND ` + dueHead + `
          ORDER BY o.created_at, o.id LIMIT 1) AS head
  FROM queues q
  WHERE q.endpoint_id IS NOT NULL AND q.endpoint_id <> ALL(@skip::uuid[])
), ready AS (
  SELECT endpoint_id, room FROM heads WHERE head IS NOT NULL AND room > 0 ORDER BY head LIMIT @limit), env_ready AS (
  SELECT @env_room::int AS room
  WHERE @env::boolean AND @env_room::int > 0
    AND (SELECT true FROM webhook_outbox o
         WHERE NOT o.processed AND o.endpoint_id IS NULL AND o.fanout IS NOT NULL AND NOT o.held AND ` + dueHead + `
         ORDER BY o.created_at, o.id LIMIT 1)
), share AS (
  SELECT greatest(1, ceil(@limit::numeric / greatest(1, (SELECT count(*) FROM ready) + (SELECT count(*) FROM env_ready))))::int AS n
), picked AS (
  SELECT c.id, r.endpoint_id, c.created_at, c.reclaimed, r.room,
         row_number() OVER (PARTITION BY r.endpoint_id ORDER BY c.created_at, c.id) AS rn
  FROM ready r CROSS JOIN share s
  CROSS JOIN LATERAL (SELECT * FROM (
    SELECT o.id, o.created_at, o.lease_token IS NOT NULL AS reclaimed
    FROM webhook_outbox o
    WHERE NOT o.processed AND o.endpoint_id = r.endpoint_id AND NOT o.held AND ` + dueHead + `
    ORDER BY o.created_at, o.id
    LIMIT least(r.room, s.n)
    FOR UPDATE SKIP LOCKED
  ) c LIMIT @limit) c
  UNION ALL
  SELECT c.id, NULL::uuid, c.created_at, c.reclaimed, r.room,
         row_number() OVER (ORDER BY c.created_at, c.id)
  FROM env_ready r CROSS JOIN share s
  CROSS JOIN LATERAL (SELECT * FROM (
    SELECT o.id, o.created_at, o.lease_token IS NOT NULL AS reclaimed
    FROM webhook_outbox o
    WHERE NOT o.processed AND o.endpoint_id IS NULL AND o.fanout IS NOT NULL AND NOT o.held AND ` + dueHead + `
    ORDER BY o.created_at, o.id
    LIMIT least(r.room, s.n)
    FOR UPDATE SKIP LOCKED
  ) c LIMIT @limit) c
), chosen AS (
  SELECT * FROM picked ORDER BY rn, created_at, id LIMIT @limit
), fan_cap AS (
  SELECT CASE WHEN @env::boolean AND @env_room::int <= 0 AND count(*) = 0 THEN 0 ELSE greatest(1, least(
    (@limit::int - (SELECT count(*) FROM chosen)::int) / greatest(1, count(*) FILTER (WHERE cardinality(e.event_types) = 0 AND e.id <> ALL(@skip::uuid[]))
      + (@env::boolean AND @env_room::int > 0)::int),
    CASE WHEN @env::boolean AND @env_room::int > 0
      THEN @env_room::int - (SELECT count(*) FROM chosen c WHERE c.endpoint_id IS NULL)::int END)) END::int AS n
  FROM webhook_endpoints e WHERE e.enabled
), locked AS (SELECT * FROM (
  SELECT o.id, o.event_type, o.created_at, o.lease_token IS NOT NULL AS reclaimed, o.ordering_key, o.fan_to, o.fan_done
  FROM webhook_outbox o
  WHERE NOT o.processed AND o.endpoint_id IS NULL AND o.fanout IS NULL AND ` + dueHead + `
    AND (o.ordering_key IS NULL OR NOT EXISTS (` + olderKeyedEvent + `))
  ORDER BY o.created_at, o.id
  LIMIT (SELECT n FROM fan_cap)
  FOR UPDATE SKIP LOCKED
) l LIMIT @limit), plain AS (
  SELECT @env::boolean AND @env_room::int > 0 AND NOT EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.enabled)
    AND NOT EXISTS (SELECT 1 FROM locked l WHERE l.fan_to IS NOT NULL) AS only_env
), subscribed AS (
  SELECT l.id AS event_id, e.id AS endpoint_id, e.id <> ALL(@skip::uuid[]) AS takes
  FROM locked l JOIN webhook_endpoints e
    ON CASE WHEN l.fan_to IS NULL THEN e.enabled AND (cardinality(e.event_types) = 0 OR l.event_type = ANY(e.event_types))
       ELSE e.id = ANY(l.fan_to) AND e.id <> ALL(coalesce(l.fan_done, '{}')) END
  UNION ALL
  SELECT l.id, NULL::uuid, @env_room::int > 0 FROM locked l WHERE @env::boolean
), events AS (
  SELECT x.id, x.event_type, x.created_at, x.reclaimed, x.ordering_key, x.fan_to
  FROM (
    SELECT l.*, row_number() OVER w AS k, sum(coalesce(m.n, 0)) OVER w AS upto
    FROM locked l
      LEFT JOIN (SELECT event_id, count(*) FILTER (WHERE takes) AS n FROM subscribed GROUP BY event_id) m ON m.event_id = l.id
    WINDOW w AS (ORDER BY l.created_at, l.id)
  ) x
  WHERE x.k = 1 OR x.upto <= @limit
), targets AS (
  SELECT ev.id AS event_id, ev.created_at, ev.id AS event_order, s.endpoint_id
  FROM events ev JOIN subscribed s ON s.event_id = ev.id
), offers AS (
  SELECT t.event_id, t.endpoint_id, t.created_at, t.event_order,
    row_number() OVER (PARTITION BY t.endpoint_id ORDER BY t.created_at, t.event_order) <= CASE
      WHEN t.endpoint_id IS NULL THEN @env_room::int - (SELECT count(*) FROM chosen c WHERE c.endpoint_id IS NULL)
      WHEN t.endpoint_id = ANY(@skip::uuid[]) THEN 0
      ELSE coalesce((@room::jsonb ->> t.endpoint_id::text)::int, @default_room::int)
           - (SELECT count(*) FROM chosen c WHERE c.endpoint_id = t.endpoint_id)
    END AS roomy
  FROM targets t
), fits AS (
  SELECT f.event_id, f.endpoint_id,
    f.roomy AND row_number() OVER (PARTITION BY f.roomy ORDER BY f.created_at, f.event_order, f.endpoint_id)
      <= @limit - (SELECT count(*) FROM chosen) AS lease
  FROM offers f
), lazy AS (
  SELECT f.event_id AS id, array_agg(f.endpoint_id) AS eps
  FROM fits f JOIN events ev ON ev.id = f.event_id
  WHERE NOT @env::boolean AND ev.ordering_key IS NULL AND ev.fan_to IS NULL AND webhook_time_clamp(ev.created_at) = ev.created_at
  GROUP BY f.event_id HAVING bool_and(f.lease)
), fanned AS (
  INSERT INTO webhook_outbox (delivery_id, event_type, payload, created_at, endpoint_id, headers, ordering_key, locked_until, lease_token)
  SELECT md5(o.delivery_id::text || '/' || f.endpoint_id::text)::uuid, o.event_type, o.payload, o.created_at, f.endpoint_id, o.headers,
         o.ordering_key,
         CASE WHEN f.lease THEN now() + @lease_ms * interval '1 millisecond' END,
         CASE WHEN f.lease THEN gen_random_uuid() END
  FROM fits f JOIN webhook_outbox o ON o.id = f.event_id
  WHERE NOT (SELECT only_env FROM plain) AND f.endpoint_id IS NOT NULL AND NOT o.processed AND o.id = ANY(ARRAY(SELECT id FROM events))
    AND f.event_id <> ALL(ARRAY(SELECT id FROM lazy))
  ORDER BY f.endpoint_id, o.ordering_key
  RETURNING id, lease_token, delivery_id, event_type, payload, headers, attempt, created_at, endpoint_id, ordering_key, ordering_seq
), counts AS (
  SELECT event_id, count(*)::int AS n FROM targets WHERE endpoint_id IS NOT NULL GROUP BY event_id
), taken AS (
  SELECT c.id, c.reclaimed, false AS fan, true AS lease, NULL::int AS n, NULL::uuid[] AS eps FROM chosen c
  UNION ALL
  SELECT l.id, l.reclaimed, true,
    row_number() OVER (ORDER BY l.created_at, l.id) <= least(@env_room::int - (SELECT count(*) FROM chosen c WHERE c.endpoint_id IS NULL),
      @limit::int - (SELECT count(*) FROM chosen)), 0, NULL
  FROM locked l WHERE (SELECT only_env FROM plain)
  UNION ALL
  SELECT ev.id, ev.reclaimed, true, coalesce(env.lease, false) OR lz.id IS NOT NULL, coalesce(counts.n, 0), lz.eps
  FROM events ev
    LEFT JOIN fits env ON env.event_id = ev.id AND env.endpoint_id IS NULL
    LEFT JOIN counts ON counts.event_id = ev.id
    LEFT JOIN lazy lz ON lz.id = ev.id
  WHERE NOT (SELECT only_env FROM plain)
), upd AS (
  UPDATE webhook_outbox o
  SET locked_until = CASE WHEN x.lease THEN now() + @lease_ms * interval '1 millisecond' END,
      lease_token = CASE WHEN x.lease THEN gen_random_uuid() END,
      reclaims = least(o.reclaims::bigint + x.reclaimed::int, 2147483647)::int,
      fanout = CASE WHEN x.eps IS NOT NULL THEN NULL WHEN x.fan THEN coalesce(cardinality(o.fan_to), x.n) + @env::boolean::int ELSE o.fanout END,
      fan_to = coalesce(x.eps, o.fan_to),
      processed = x.fan AND NOT @env::boolean AND x.eps IS NULL,
      processed_at = CASE WHEN x.fan AND NOT @env::boolean AND x.eps IS NULL THEN now() END
  FROM taken x
  WHERE NOT o.processed AND o.id = ANY(ARRAY(SELECT id FROM taken)) AND o.id = x.id
  RETURNING o.id, o.lease_token, o.delivery_id, o.event_type, o.payload, o.headers, o.attempt, o.created_at, x.reclaimed,
    o.endpoint_id, x.fan, coalesce(o.fanout, cardinality(x.eps)) AS fanout, o.ordering_key, o.ordering_seq, x.eps IS NOT NULL AS lz
), more AS (
  SELECT (SELECT count(*) FROM picked) > (SELECT count(*) FROM chosen)
      OR (SELECT count(*) FROM heads WHERE head IS NOT NULL AND room > 0) > (SELECT count(*) FROM ready)
      OR EXISTS (SELECT 1 FROM picked p, share s WHERE p.rn = s.n AND s.n < p.room)
      OR NOT (SELECT only_env FROM plain) AND (SELECT count(*) FROM locked) > (SELECT count(*) FROM events)
      OR (SELECT n FROM fan_cap) > 0 AND (SELECT count(*) FROM locked) = (SELECT n FROM fan_cap) AND coalesce((
        SELECT true FROM webhook_outbox o
        WHERE NOT o.processed AND o.endpoint_id IS NULL AND o.fanout IS NULL AND ` + dueHead + `
          AND o.id <> ALL(ARRAY(SELECT id FROM locked))
        ORDER BY o.created_at, o.id LIMIT 1), false) AS more
), out AS (
  SELECT u.id, u.lease_token IS NOT NULL AND NOT u.lz AS leased, u.lease_token, u.delivery_id, u.event_type, u.payload, u.headers,
         u.attempt, u.created_at, u.reclaimed, u.endpoint_id, u.fan, u.fanout, false AS fresh, u.ordering_key, u.ordering_seq, 0::bigint AS event,
         u.lz
  FROM upd u
  UNION ALL
  SELECT f.id, true, f.lease_token, f.delivery_id, f.event_type, f.payload, f.headers, f.attempt, f.created_at, false,
         f.endpoint_id, false, NULL, true, f.ordering_key, f.ordering_seq, 0, false
  FROM fanned f WHERE f.lease_token IS NOT NULL
  UNION ALL
  SELECT nextval('webhook_outbox_id_seq'::regclass), true, u.lease_token, md5(u.delivery_id::text || '/' || f.endpoint_id::text)::uuid,
         u.event_type, NULL, NULL, 1, u.created_at, false, f.endpoint_id, false, NULL, true, NULL, NULL, u.id, false
  FROM upd u JOIN fits f ON f.event_id = u.id
  WHERE u.lz
)
SELECT o.id, coalesce(o.lease_token, '00000000-0000-0000-0000-000000000000'::uuid), o.delivery_id::text,
  o.event_type, CASE WHEN o.leased OR o.lz THEN o.payload::text END,
  CASE WHEN o.leased OR o.lz THEN o.headers::text END, o.attempt, o.created_at, o.reclaimed,
  coalesce(o.endpoint_id::text, ''), coalesce(e.name, ''), coalesce(e.url, ''), coalesce(e.secret, ''),
  coalesce(e.enabled, true), coalesce(e.disabled_reason, ''), coalesce(e.retry_rps, 0),
  CASE WHEN e.secret_previous_until > now() THEN e.secret_previous ELSE '' END,
  CASE WHEN e.secret_previous_until > now() THEN e.secret_previous_until END,
  o.leased, o.fan, coalesce(o.fanout, 0), o.fresh, m.more,
  CASE WHEN o.leased THEN coalesce(o.ordering_key, '') ELSE '' END, coalesce(o.ordering_seq, 0),
  (SELECT only_env FROM plain) AND NOT EXISTS (SELECT 1 FROM queues q WHERE q.endpoint_id IS NOT NULL), o.event
FROM out o CROSS JOIN more m
  LEFT JOIN webhook_endpoints e ON e.id = o.endpoint_id`
