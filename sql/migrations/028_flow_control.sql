-- 028: flow control per endpoint (docs/endpoints.md, "Flow control";
-- ARCHITECTURE.md, "Flow control").
--
-- An endpoint may have a rate (rate_limit requests per rate_period_s
-- seconds, 1 or 60, with rate_burst more at once) and a most requests in
-- flight (max_in_flight), both across every worker. Its state lives in
-- webhook_flow, one row per endpoint under flow control (the WEBHOOK_URL
-- endpoint's under the nil uuid, its limits being the worker's settings):
--
--   tokens, refilled_at   a token bucket: tokens as of refilled_at; it
--                         refills at rate_limit / rate_period_s a second,
--                         up to greatest(rate_burst, 1); a claim takes a
--                         delivery only for a whole token;
--   granted_at, granted_n when claims took deliveries, and how many: those
--                         of the last window (rate_period_s and 50 ms)
--                         count against rate_limit + rate_burst, so that
--                         the consumer sees no more than that in any
--                         window of rate_period_s, though a claim's
--                         requests leave some milliseconds after it;
--   in_flight             the ids of the rows claims leased under the
--                         limit; one still pending, leased and not expired
--                         counts against max_in_flight (the others are
--                         dropped from the list);
--   paused_until          the consumer asked for a pause (429 or 503 with
--                         Retry-After): no claim takes its deliveries until
--                         then, whatever its limits.
--
-- A claim locks the rows it grants from (claim_flow, FOR UPDATE SKIP
-- LOCKED: a row another claim holds grants nothing) and writes what it
-- took (claim_settle) in the same transaction. The row of an endpoint
-- removed stays until the janitor's next pass; it costs nothing meanwhile.
--
-- Only columns, a table and functions are added: workers of the previous
-- release run unchanged, and ignore the limits (docs/deployment.md, "Migrations and upgrades").
SET LOCAL lock_timeout = '200ms'; -- see 003: never queue producers behind a long transaction

ALTER TABLE webhook_endpoints
    ADD COLUMN IF NOT EXISTS rate_limit    int,
    ADD COLUMN IF NOT EXISTS rate_period_s int,
    ADD COLUMN IF NOT EXISTS rate_burst    int NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS max_in_flight int;

DO $$
BEGIN
    ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_rate_check
        CHECK ((rate_limit IS NULL AND rate_period_s IS NULL)
            OR (rate_limit BETWEEN 1 AND 1000000 AND rate_period_s IN (1, 60)));
    ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_rate_burst_check
        CHECK (rate_burst BETWEEN 0 AND 1000000);
    ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_max_in_flight_check
        CHECK (max_in_flight BETWEEN 1 AND 100000);
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;

-- The claim finds the endpoints under a limit on this index, not by
-- reading every endpoint.
CREATE INDEX IF NOT EXISTS webhook_endpoints_flow_idx ON webhook_endpoints (id)
    WHERE rate_limit IS NOT NULL OR max_in_flight IS NOT NULL;

CREATE TABLE IF NOT EXISTS webhook_flow (
    endpoint_id  uuid PRIMARY KEY,
    tokens       double precision NOT NULL DEFAULT 0,
    refilled_at  timestamptz NOT NULL DEFAULT now(),
    in_flight    bigint[] NOT NULL DEFAULT '{}',
    granted_at   timestamptz[] NOT NULL DEFAULT '{}',
    granted_n    int[] NOT NULL DEFAULT '{}',
    paused_until timestamptz
);
CREATE INDEX IF NOT EXISTS webhook_flow_paused_idx ON webhook_flow (paused_until) WHERE paused_until IS NOT NULL;
SELECT webhook_copy_grants('webhook_outbox', 'webhook_flow');

-- webhook_queues lists the endpoints with pending deliveries not held, in
-- order, one probe of webhook_outbox_queue_idx each (a loose index scan):
-- the claim's queues, the plain claim's and next_due's. LANGUAGE sql,
-- STABLE, not STRICT, one SELECT: the planner inlines it where it is
-- called, as if it were written out there.
CREATE OR REPLACE FUNCTION webhook_queues() RETURNS SETOF uuid
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE queues(endpoint_id) AS (
        (SELECT o.endpoint_id
         FROM webhook_outbox o
         WHERE NOT o.processed AND o.endpoint_id IS NOT NULL AND NOT o.held
         ORDER BY o.endpoint_id
         LIMIT 1)
        UNION ALL
        SELECT (SELECT o.endpoint_id
                FROM webhook_outbox o
                WHERE NOT o.processed AND o.endpoint_id > q.endpoint_id AND NOT o.held
                ORDER BY o.endpoint_id
                LIMIT 1)
        FROM queues q
        WHERE q.endpoint_id IS NOT NULL
    )
    SELECT endpoint_id FROM queues WHERE endpoint_id IS NOT NULL
$$;

-- webhook_flow_key is an endpoint's key in webhook_flow and in
-- fluxora.claim's grant: its uuid text, the nil uuid's for NULL (the
-- WEBHOOK_URL endpoint).
CREATE OR REPLACE FUNCTION webhook_flow_key(p_endpoint uuid) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(p_endpoint, '00000000-0000-0000-0000-000000000000')::text
$$;

-- webhook_flow_room is an endpoint's room in a claim: p_room, the worker's
-- own, at most what claim_flow granted it (p_grants, fluxora.claim's
-- grant: by webhook_flow_key, or "*" for every endpoint without a key of
-- its own). An endpoint without a grant is not under flow control;
-- without grants (NULL: nothing is) the room is p_room at once, the common
-- case, which costs each offer of a fan-out nothing more. The arguments
-- must stay cheap (a column, a cast: no subquery), or the planner, seeing
-- a parameter used more than once, calls it rather than inlining it.
CREATE OR REPLACE FUNCTION webhook_flow_room(p_grants jsonb, p_endpoint uuid, p_room int) RETURNS int
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_grants IS NULL THEN p_room
        ELSE least(p_room, coalesce((coalesce(p_grants -> webhook_flow_key(p_endpoint), p_grants -> '*') #>> '{}')::int, p_room)) END
$$;

-- webhook_flow_tokens is a bucket's tokens at p_at: p_tokens as of
-- p_since, refilled at p_per_s a second up to p_cap.
CREATE OR REPLACE FUNCTION webhook_flow_tokens(p_tokens double precision, p_since timestamptz, p_at timestamptz,
    p_per_s double precision, p_cap int) RETURNS double precision
LANGUAGE sql IMMUTABLE AS $$
    SELECT least(p_cap::double precision, p_tokens + greatest(EXTRACT(EPOCH FROM p_at - p_since)::double precision, 0) * p_per_s)
$$;
