-- 022: the pieces the store's reads share, as functions, so that each
-- statement of outbox/queries/ is written whole and runs in psql as it
-- stands:
--
--   webhook_endpoint_name       the name shown for a row's endpoint: its
--                               name, "(removed)", or "default" for the
--                               WEBHOOK_URL endpoint (endpoint_id NULL).
--   webhook_endpoint_shown      an endpoint as the catalog shows it: never
--                               a secret or a key, times clamped, the end of
--                               a secret's grace period only while it lasts.
--   webhook_outbox_pending_rows every pending row, through the partial
--                               indexes that together hold them.
--   webhook_fan_out_in_flight   the deliveries of the fan-outs in flight
--                               (018) whose outcome is not written yet.
--
-- Each is LANGUAGE sql, not STRICT, IMMUTABLE or STABLE, one SELECT: the
-- planner inlines it into the statement that calls it, which is planned as
-- if it were written out there (its indexes, its partitions pruned). A
-- function that reads a table is STABLE; webhook_endpoint_shown reads
-- now(). Only functions are added: workers of the previous release run
-- unchanged; this release's workers need them (Check refuses to start
-- them before `worker migrate`).
SET LOCAL lock_timeout = '200ms'; -- see 003: never queue producers behind a long transaction

-- webhook_endpoint_name is the name shown for the endpoint p_id of a row
-- of webhook_outbox, webhook_dead_letter or webhook_attempts, given p_name,
-- the name of the webhook_endpoints row LEFT JOINed to it (NULL when there
-- is none). "default" is the worker's DefaultEndpointName.
CREATE OR REPLACE FUNCTION webhook_endpoint_name(p_id uuid, p_name text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_id IS NULL THEN 'default' ELSE coalesce(p_name, '(removed)') END
$$;

-- webhook_endpoint_shown is the endpoint e as the catalog returns it:
-- every time through webhook_time_clamp, NULL text and counts as '' and 0,
-- the end of the previous secret's grace period only while it lasts (by
-- the database clock). A row changed by a statement is shown with
-- "RETURNING webhook_endpoints AS e" in a CTE, then this.
CREATE OR REPLACE FUNCTION webhook_endpoint_shown(e webhook_endpoints)
RETURNS TABLE (id text, name text, url text, event_types text[], enabled boolean, disabled_reason text, retry_rps integer,
               created_at timestamptz, updated_at timestamptz, failing_since timestamptz, last_error text, last_status integer,
               last_error_at timestamptz, disabled_at timestamptz, previous_secret_until timestamptz,
               client_cert_not_after timestamptz, ordering text)
LANGUAGE sql STABLE AS $$
    SELECT e.id::text, e.name, e.url, e.event_types, e.enabled, coalesce(e.disabled_reason, ''), coalesce(e.retry_rps, 0),
           webhook_time_clamp(e.created_at), webhook_time_clamp(e.updated_at), webhook_time_clamp(e.failing_since),
           coalesce(e.last_error, ''), coalesce(e.last_status, 0), webhook_time_clamp(e.last_error_at),
           webhook_time_clamp(e.disabled_at),
           CASE WHEN e.secret_previous_until > now() THEN webhook_time_clamp(e.secret_previous_until) END,
           webhook_time_clamp(e.client_cert_not_after), e.ordering
$$;

-- webhook_outbox_pending_rows is every pending row of webhook_outbox, read
-- through the four partial indexes that together hold them (012, 015): an
-- endpoint's deliveries, the events not fanned out yet, the WEBHOOK_URL
-- endpoint's deliveries, and the rows of either waiting behind the head of
-- their lane (held, through webhook_outbox_lane_idx). A plain "WHERE NOT
-- processed" matches none of the indexes.
CREATE OR REPLACE FUNCTION webhook_outbox_pending_rows() RETURNS SETOF webhook_outbox
LANGUAGE sql STABLE AS $$
    SELECT * FROM webhook_outbox WHERE NOT processed AND endpoint_id IS NOT NULL AND NOT held
    UNION ALL
    SELECT * FROM webhook_outbox WHERE NOT processed AND endpoint_id IS NULL AND fanout IS NULL
    UNION ALL
    SELECT * FROM webhook_outbox WHERE NOT processed AND endpoint_id IS NULL AND fanout IS NOT NULL AND NOT held
    UNION ALL
    SELECT * FROM webhook_outbox
    WHERE NOT processed AND ordering_key IS NOT NULL AND (endpoint_id IS NOT NULL OR fanout IS NOT NULL) AND held
$$;

-- webhook_fan_out_in_flight is, for each event in flight (018) and each
-- endpoint of its fan_to not yet in fan_done, the delivery it owes: it has
-- no row of its own until its outcome is written, and is in flight while
-- the event's lease lasts (locked_until). delivery_id is the id the claim
-- gave it, as every fan-out's: md5 of the event's id, '/', the endpoint's
-- id. Read through webhook_outbox_events_idx.
CREATE OR REPLACE FUNCTION webhook_fan_out_in_flight()
RETURNS TABLE (delivery_id uuid, endpoint_id uuid, event_id uuid, event_type text, payload jsonb, headers jsonb,
               ordering_key text, created_at timestamptz, locked_until timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT md5(o.delivery_id::text || '/' || x.e::text)::uuid, x.e, o.delivery_id, o.event_type, o.payload, o.headers,
           o.ordering_key, o.created_at, o.locked_until
    FROM webhook_outbox o
    CROSS JOIN LATERAL unnest(o.fan_to) AS x(e)
    WHERE NOT o.processed AND o.endpoint_id IS NULL AND o.fanout IS NULL AND o.fan_to IS NOT NULL
      AND x.e <> ALL(coalesce(o.fan_done, '{}'))
$$;
