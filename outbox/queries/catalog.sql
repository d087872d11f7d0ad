-- The endpoint catalog (webhook_endpoints): add, list, read, change and
-- enable an endpoint. Each returns the endpoint as webhook_endpoint_shown
-- shows it (migration 022): never a secret or a key. A changed row is
-- shown from the CTE that changed it ("RETURNING webhook_endpoints AS e"),
-- since the statement's own reads see the table as it was before. The
-- table's constraints and trigger check every value written.

-- name: add_endpoint
-- Inserts an endpoint, enabled, under :'id' (NULL: a new uuid); a :'retry_rps'
-- of 0 stores no override, a NULL :'client_cert' none, an empty :'ordering'
-- the default ('move-on'); a :'rate_limit' or :'max_in_flight' of 0 no
-- such limit (migration 028); an empty :'payload_filter' no filter
-- (migration 030). A taken name is a unique violation (23505).
WITH added AS (
  INSERT INTO webhook_endpoints (id, name, url, secret, event_types, retry_rps, client_cert, client_key, client_cert_not_after, ordering,
    rate_limit, rate_period_s, rate_burst, max_in_flight, payload_filter)
  VALUES (coalesce(:'id'::uuid, gen_random_uuid()), :'name', :'url', :'secret', :'event_types', nullif(:'retry_rps', 0),
    :'client_cert', :'client_key', :'client_cert_not_after', coalesce(nullif(:'ordering'::text, ''), 'move-on'),
    nullif(:'rate_limit'::int, 0), CASE WHEN :'rate_limit'::int > 0 THEN :'rate_period_s'::int END, :'rate_burst',
    nullif(:'max_in_flight'::int, 0), nullif(:'payload_filter'::text, '')::jsonpath)
  RETURNING webhook_endpoints AS e
)
SELECT s.*
FROM added
CROSS JOIN LATERAL webhook_endpoint_shown(added.e) s;

-- name: endpoints
-- Every endpoint, by name.
SELECT s.*
FROM webhook_endpoints e
CROSS JOIN LATERAL webhook_endpoint_shown(e) s
ORDER BY e.name;

-- name: endpoint_by_name
-- The endpoint named :'name'.
SELECT s.*
FROM webhook_endpoints e
CROSS JOIN LATERAL webhook_endpoint_shown(e) s
WHERE e.name = :'name';

-- name: update_endpoint
-- Changes the endpoint named :'name': each NULL parameter keeps its column;
-- a :'retry_rps' of 0 clears the override, a :'rate_limit' or
-- :'max_in_flight' of 0 that limit, an empty :'payload_filter' the filter. A new :'secret' takes over at once
-- and ends any grace period of an earlier rotation (the previous secret is
-- erased with its end). A :'client_cert' replaces the client certificate
-- ('': removes it). With :'id', only the endpoint of that name and id
-- changes (the one its new values were sealed for).
WITH changed AS (
  UPDATE webhook_endpoints
  SET url = coalesce(:'url', url),
    event_types = coalesce(:'event_types', event_types),
    retry_rps = CASE WHEN :'retry_rps'::int IS NULL THEN retry_rps ELSE nullif(:'retry_rps'::int, 0) END,
    secret = coalesce(:'secret', secret),
    ordering = coalesce(:'ordering', ordering),
    secret_previous = CASE WHEN :'secret'::text IS NULL THEN secret_previous END,
    secret_previous_until = CASE WHEN :'secret'::text IS NULL THEN secret_previous_until END,
    client_cert = CASE WHEN :'client_cert'::text IS NULL THEN client_cert ELSE nullif(:'client_cert'::text, '') END,
    client_key = CASE WHEN :'client_cert'::text IS NULL THEN client_key ELSE nullif(:'client_key'::text, '') END,
    client_cert_not_after = CASE WHEN :'client_cert'::text IS NULL THEN client_cert_not_after ELSE :'client_cert_not_after'::timestamptz END,
    rate_limit = CASE WHEN :'rate_limit'::int IS NULL THEN rate_limit ELSE nullif(:'rate_limit'::int, 0) END,
    rate_period_s = CASE WHEN :'rate_limit'::int IS NULL THEN rate_period_s WHEN :'rate_limit'::int > 0 THEN :'rate_period_s'::int END,
    rate_burst = coalesce(:'rate_burst'::int, rate_burst),
    max_in_flight = CASE WHEN :'max_in_flight'::int IS NULL THEN max_in_flight ELSE nullif(:'max_in_flight'::int, 0) END,
    payload_filter = CASE WHEN :'payload_filter'::text IS NULL THEN payload_filter ELSE nullif(:'payload_filter'::text, '')::jsonpath END
  WHERE name = :'name' AND (:'id'::uuid IS NULL OR id = :'id'::uuid)
  RETURNING webhook_endpoints AS e
)
SELECT s.*
FROM changed
CROSS JOIN LATERAL webhook_endpoint_shown(changed.e) s;

-- name: enable_endpoint
-- Enables the endpoint named :'name' and clears its disabled reason and time
-- and its run of failures (failing_since), so that the janitor does not
-- disable it again at once. Its dead letters stay.
WITH turned_on AS (
  UPDATE webhook_endpoints
  SET enabled = true,
    disabled_reason = NULL,
    disabled_at = NULL,
    failing_since = NULL
  WHERE name = :'name'
  RETURNING webhook_endpoints AS e
)
SELECT s.*
FROM turned_on
CROSS JOIN LATERAL webhook_endpoint_shown(turned_on.e) s;
