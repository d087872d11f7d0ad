-- Flow control per endpoint (migration 028): the claim's first and last
-- statements while the claim runs its steps (claim.sql), in the same
-- transaction. ARCHITECTURE.md, "Flow control".

-- name: claim_flow_probe
-- The claim's first statement while the claims before it found nothing
-- under flow control: says whether anything is now (flow: an endpoint with
-- a limit, or one paused), and if so grants every endpoint nothing
-- (fluxora.claim's grant "*"), so that the steps after it take nothing and
-- the claim runs again with claim_flow.
SELECT set_config('fluxora.claim', CASE WHEN f.flow THEN '{"grant": {"*": 0}}' ELSE '{}' END, true) IS NOT NULL AS granted,
  NULL::bigint AS wait_ms,
  0::bigint AS made,
  f.flow
FROM (SELECT EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.rate_limit IS NOT NULL OR e.max_in_flight IS NOT NULL)
        OR EXISTS (SELECT 1 FROM webhook_flow f WHERE f.paused_until > now()) AS flow) f;

-- name: claim_flow
-- Grants each endpoint under flow control the deliveries this claim may
-- take of it, in fluxora.claim's grant (by webhook_flow_key; the steps
-- read it through webhook_flow_room): none while it is paused, or while
-- another claim holds its row of webhook_flow; else as many as its bucket
-- holds whole tokens and its in-flight list leaves room under
-- max_in_flight and the grants of its last window under rate_limit +
-- rate_burst. None either when the row it locked is newer than the
-- statement sees the outbox (a claim committed meanwhile: wait_ms 1). It
-- keeps the rows it grants from locked to the end of the
-- claim, for claim_settle (fluxora.claim's flow: the tokens and the live
-- in-flight ids), and says how long until an endpoint granted nothing may
-- be granted some (wait_ms; NULL when there is none), and whether
-- anything is under flow control still (flow).
WITH limited AS (
  SELECT e.id AS endpoint_id, e.rate_limit::float8 / e.rate_period_s AS per_s, greatest(e.rate_burst, 1) AS cap,
    e.rate_limit + e.rate_burst AS most, e.rate_period_s * 1000 + 50 AS window_ms, e.max_in_flight
  FROM webhook_endpoints e
  WHERE (e.rate_limit IS NOT NULL OR e.max_in_flight IS NOT NULL) AND e.enabled
  UNION ALL
  SELECT '00000000-0000-0000-0000-000000000000'::uuid, nullif(:'env_rate'::int, 0)::float8 / greatest(:'env_period_s'::int, 1),
    greatest(:'env_burst'::int, 1), nullif(:'env_rate'::int, 0) + :'env_burst'::int, greatest(:'env_period_s'::int, 1) * 1000 + 50,
    nullif(:'env_max_in_flight'::int, 0)
  WHERE :'env'::boolean AND (:'env_rate'::int > 0 OR :'env_max_in_flight'::int > 0)
), made AS (
  INSERT INTO webhook_flow (endpoint_id, tokens)
  SELECT l.endpoint_id, l.cap
  FROM limited l
  WHERE NOT EXISTS (SELECT 1 FROM webhook_flow f WHERE f.endpoint_id = l.endpoint_id)
  ON CONFLICT (endpoint_id) DO NOTHING
  RETURNING endpoint_id
), paused AS (
  SELECT f.endpoint_id, f.paused_until
  FROM webhook_flow f
  WHERE f.paused_until > now()
), held AS (
  SELECT f.endpoint_id, f.tokens, f.refilled_at, f.in_flight, f.granted_at, f.granted_n, f.xmin::text AS version
  FROM webhook_flow f
  WHERE f.endpoint_id IN (SELECT endpoint_id FROM limited) AND NOT coalesce(f.paused_until > now(), false)
  FOR UPDATE SKIP LOCKED
), grants AS (
  SELECT h.endpoint_id, c.tokens, c.live, l.per_s, l.window_ms, c.stale,
    CASE WHEN c.stale THEN 0 ELSE greatest(0, least(coalesce(floor(c.tokens)::int, 2147483647),
      coalesce(l.max_in_flight - cardinality(c.live), 2147483647), coalesce(l.most - c.recent, 2147483647))) END AS n
  FROM held h
  JOIN limited l ON l.endpoint_id = h.endpoint_id
  CROSS JOIN LATERAL (
    SELECT CASE WHEN l.per_s IS NOT NULL THEN webhook_flow_tokens(h.tokens, h.refilled_at, now(), l.per_s, l.cap) END AS tokens,
      ARRAY(SELECT o.id
            FROM webhook_outbox o
            WHERE NOT o.processed AND o.id = ANY(h.in_flight) AND o.lease_token IS NOT NULL AND o.locked_until > now()
            ORDER BY o.id) AS live,
      (SELECT coalesce(sum(g.n), 0)
       FROM unnest(h.granted_at, h.granted_n) AS g(at, n)
       WHERE g.at > now() - l.window_ms * interval '1 millisecond') AS recent,
      (SELECT f.xmin::text FROM webhook_flow f WHERE f.endpoint_id = h.endpoint_id) IS DISTINCT FROM h.version AS stale) c
), nothing AS (
  SELECT l.endpoint_id,
    CASE WHEN g.endpoint_id IS NULL THEN 10
      WHEN g.stale THEN 1
      WHEN g.tokens < 1 THEN ceil((1 - g.tokens) / g.per_s * 1000)
      ELSE 50 END AS wait_ms
  FROM limited l
  LEFT JOIN grants g ON g.endpoint_id = l.endpoint_id
  WHERE coalesce(g.n, 0) = 0 AND l.endpoint_id NOT IN (SELECT endpoint_id FROM paused)
  UNION ALL
  SELECT p.endpoint_id, ceil(EXTRACT(EPOCH FROM p.paused_until - now()) * 1000)
  FROM paused p
)
SELECT set_config('fluxora.claim', jsonb_build_object(
    'grant', (SELECT coalesce(jsonb_object_agg(x.endpoint_id, x.n), '{}')
              FROM (SELECT g.endpoint_id, g.n FROM grants g UNION ALL SELECT n.endpoint_id, 0 FROM nothing n) x),
    'flow', (SELECT coalesce(jsonb_object_agg(g.endpoint_id, jsonb_build_object('tokens', g.tokens, 'live', g.live,
               'window_ms', g.window_ms)), '{}')
             FROM grants g
             WHERE NOT g.stale))::text, true) IS NOT NULL AS granted,
  (SELECT min(wait_ms) FROM nothing)::bigint AS wait_ms,
  (SELECT count(*) FROM made) AS made,
  EXISTS (SELECT 1 FROM limited) OR EXISTS (SELECT 1 FROM paused) AS flow;

-- name: claim_settle
-- Writes back, for each endpoint claim_flow granted from, what the claim
-- took under its limits (fluxora.claim's leased: endpoint key and row id,
-- from every step): its tokens less one a delivery, as of now; its
-- in-flight list, the live ids and the new ones; and its grants of the
-- last window with this one's, at the claim's end (when its requests
-- leave, however long the claim took). A row whose grant went unused keeps its
-- tokens as they were, and so its time of refill.
WITH told AS (
  SELECT coalesce(nullif(current_setting('fluxora.claim', true), '')::jsonb, '{}') AS t
), taken AS (
  SELECT x ->> 0 AS endpoint_key, array_agg((x ->> 1)::bigint) AS ids
  FROM told
  CROSS JOIN jsonb_array_elements(coalesce(t -> 'leased', '[]')) x
  GROUP BY x ->> 0
), flow AS (
  SELECT fl.key AS endpoint_key, (fl.value ->> 'tokens')::float8 AS tokens, (fl.value ->> 'window_ms')::int AS window_ms,
    ARRAY(SELECT jsonb_array_elements_text(fl.value -> 'live')::bigint) AS live
  FROM told
  CROSS JOIN jsonb_each(coalesce(t -> 'flow', '{}')) fl
), settled AS (
  UPDATE webhook_flow f
  SET tokens = coalesce(w.tokens - coalesce(cardinality(k.ids), 0), f.tokens),
    refilled_at = CASE WHEN w.tokens IS NOT NULL THEN now() ELSE f.refilled_at END,
    in_flight = w.live || coalesce(k.ids, '{}'),
    granted_at = r.at || CASE WHEN k.ids IS NOT NULL AND w.window_ms IS NOT NULL THEN ARRAY[clock_timestamp()] ELSE '{}' END,
    granted_n = r.n || CASE WHEN k.ids IS NOT NULL AND w.window_ms IS NOT NULL THEN ARRAY[cardinality(k.ids)] ELSE '{}' END
  FROM flow w
  CROSS JOIN LATERAL (
    SELECT coalesce(array_agg(g.at ORDER BY g.at), '{}') AS at, coalesce(array_agg(g.n ORDER BY g.at), '{}') AS n
    FROM webhook_flow x
    CROSS JOIN unnest(x.granted_at, x.granted_n) AS g(at, n)
    WHERE x.endpoint_id = w.endpoint_key::uuid AND g.at > now() - w.window_ms * interval '1 millisecond') r
  LEFT JOIN taken k ON k.endpoint_key = w.endpoint_key
  WHERE f.endpoint_id = w.endpoint_key::uuid
    AND (k.ids IS NOT NULL OR cardinality(w.live) <> cardinality(f.in_flight))
  RETURNING f.endpoint_id
)
SELECT count(*) AS settled
FROM settled;

-- name: pause
-- Pauses the endpoints whose consumers asked for it (:'endpoints', uuid
-- text, '' for the WEBHOOK_URL endpoint; :'pause_ms' each, once each): no
-- claim takes their deliveries until then (claim_flow, claim_plain). A
-- pause that ends later already stays.
INSERT INTO webhook_flow AS f (endpoint_id, paused_until)
SELECT webhook_flow_key(nullif(p.endpoint, '')::uuid)::uuid AS endpoint_id, clock_timestamp() + p.ms * interval '1 millisecond' AS until
FROM unnest(:'endpoints'::text[], :'pause_ms'::bigint[]) AS p(endpoint, ms)
ON CONFLICT (endpoint_id) DO UPDATE
SET paused_until = greatest(f.paused_until, excluded.paused_until);

-- name: endpoint_flows
-- Every endpoint's flow control, and the end of its pause if one holds, by
-- name (the list's, the status's); the WEBHOOK_URL endpoint's pause, if one
-- holds, under the name ''.
SELECT e.name,
  coalesce(e.rate_limit, 0) AS rate_limit,
  coalesce(e.rate_period_s, 0) AS rate_period_s,
  e.rate_burst,
  coalesce(e.max_in_flight, 0) AS max_in_flight,
  f.paused_until
FROM webhook_endpoints e
LEFT JOIN webhook_flow f ON f.endpoint_id = e.id AND f.paused_until > now()
UNION ALL
SELECT '', 0, 0, 0, 0, f.paused_until
FROM webhook_flow f
WHERE f.endpoint_id = '00000000-0000-0000-0000-000000000000' AND f.paused_until > now()
ORDER BY 1;
