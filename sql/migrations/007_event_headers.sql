-- 007: per-event headers. webhook_outbox.headers is a JSON object of extra
-- request headers for the event (e.g. traceparent, x-correlation-id), set by
-- the producer and sent, unchanged, on every attempt of every delivery of
-- the event: the fan-out copies it into each delivery row, a retry into its
-- next attempt, a dead letter keeps it and a replay brings it back. NULL (the
-- plain INSERT of every existing producer): no extra headers.
--
-- The rules are checked at insert, while the producer can still react; the
-- worker's sender holds the same rules in Go (sender.CheckHeaders), tested
-- side by side with webhook_headers_problem on one table of cases.
SET LOCAL lock_timeout = '200ms'; -- see 003: never queue producers behind a long transaction

-- Catalog-only: nullable columns without a default.
ALTER TABLE webhook_outbox ADD COLUMN IF NOT EXISTS headers jsonb;
ALTER TABLE webhook_dead_letter ADD COLUMN IF NOT EXISTS headers jsonb;

-- webhook_headers_problem says why h is not an acceptable headers object,
-- naming the header (as a JSON string), or NULL when it is acceptable. In
-- this order: a JSON object whose values are all strings; at most 16
-- headers; then each header in jsonb's order: its name an HTTP token (RFC
-- 9110 tchar), not one the worker or the transport owns (compared
-- case-insensitively: content-type, content-length, host, user-agent,
-- x-fluxora-*, webhook-*, and the hop-by-hop connection, keep-alive,
-- proxy-connection, proxy-authenticate, proxy-authorization, te, trailer,
-- transfer-encoding, upgrade), its value without control characters (C0,
-- DEL, C1: CR and LF could forge headers), its name not given twice in
-- another case; last, at most 8 KiB of names and values. Names are kept as
-- given. The texts never quote a value.
CREATE OR REPLACE FUNCTION webhook_headers_problem(h jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    k      text;
    v      jsonb;
    s      text;
    lk     text;
    reason text;
    n      integer := 0;
    total  bigint := 0;
    seen   jsonb := '{}'; -- lower-case name -> the name as given
BEGIN
    IF h IS NULL THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(h) <> 'object' THEN
        RETURN 'must be a JSON object of string values';
    END IF;
    FOR k, v IN SELECT key, value FROM jsonb_each(h) LOOP
        IF jsonb_typeof(v) <> 'string' THEN
            RETURN format('%s: the value must be a string without CR, LF or control characters', to_json(k));
        END IF;
        n := n + 1;
    END LOOP;
    IF n > 16 THEN
        RETURN format('at most 16 headers, got %s', n);
    END IF;
    FOR k, s IN SELECT key, value FROM jsonb_each_text(h) LOOP
        IF k !~ '^[!#$%&''*+.^_`|~0-9A-Za-z-]+$' THEN
            RETURN format('%s: a header name must be an HTTP token', to_json(k));
        END IF;
        lk := lower(k COLLATE "C");
        reason := CASE
            WHEN lk IN ('content-type', 'content-length', 'host', 'user-agent') THEN 'the worker sets it'
            WHEN left(lk, 10) = 'x-fluxora-' THEN 'x-fluxora-* headers are the worker''s'
            WHEN left(lk, 8) = 'webhook-' THEN 'webhook-* headers are the worker''s'
            WHEN lk IN ('connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization',
                        'te', 'trailer', 'transfer-encoding', 'upgrade') THEN 'it is a hop-by-hop header'
        END;
        IF reason IS NOT NULL THEN
            RETURN format('%s may not be set: %s', to_json(k), reason);
        END IF;
        IF s ~ '[\x01-\x1f\x7f-\x9f]' THEN
            RETURN format('%s: the value must be a string without CR, LF or control characters', to_json(k));
        END IF;
        IF seen ? lk THEN
            RETURN format('%s and %s are the same header (names are case-insensitive)', to_json(seen ->> lk), to_json(k));
        END IF;
        seen := seen || jsonb_build_object(lk, k);
        total := total + octet_length(k) + octet_length(s);
    END LOOP;
    IF total > 8192 THEN
        RETURN format('at most 8 KiB (names and values), got %s bytes', total);
    END IF;
    RETURN NULL;
END;
$$;

-- webhook_headers_check is the CHECK of webhook_outbox.headers: it raises
-- with a message naming the column and the header (a plain CHECK that
-- returned false would name only the constraint, and its DETAIL would print
-- the whole row, payload included), and returns true otherwise.
CREATE OR REPLACE FUNCTION webhook_headers_check(h jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    problem text := webhook_headers_problem(h);
BEGIN
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'webhook_outbox.headers: %', problem
            USING ERRCODE = '23514', CONSTRAINT = 'webhook_outbox_headers_valid';
    END IF;
    RETURN true;
END;
$$;

-- NOT VALID: the column is new, so every existing row is NULL and needs no
-- scan under the table lock; new and updated rows are checked all the same.
-- "headers IS NULL OR" comes first: a producer that sets no headers never
-- calls the function. No trigger: producers pay nothing for the feature.
DO $$
BEGIN
    ALTER TABLE webhook_outbox ADD CONSTRAINT webhook_outbox_headers_valid
        CHECK (headers IS NULL OR webhook_headers_check(headers)) NOT VALID;
EXCEPTION WHEN duplicate_object THEN NULL;
END;
$$;

-- webhook_enqueue takes the headers too. The behaviour and messages of 004
-- are kept; the headers are checked by the table's constraint (the message
-- above). The three-argument version is dropped, so that calls stay
-- unambiguous, after its EXECUTE grants (when they were changed from the
-- default) are copied to the new one.
CREATE OR REPLACE FUNCTION webhook_enqueue(p_event_type text, p_payload jsonb, p_endpoint text DEFAULT NULL,
                                           p_headers jsonb DEFAULT NULL) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_id uuid;
    v_endpoint uuid;
BEGIN
    IF p_event_type IS NULL OR p_event_type = '' THEN
        RAISE EXCEPTION 'webhook_enqueue: event_type must not be empty' USING ERRCODE = '22023';
    END IF;
    IF octet_length(p_event_type) > 255 OR p_event_type ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'webhook_enqueue: event_type must be at most 255 bytes without control characters' USING ERRCODE = '22023';
    END IF;
    IF p_payload IS NULL THEN
        RAISE EXCEPTION 'webhook_enqueue: payload must not be NULL' USING ERRCODE = '22023';
    END IF;
    IF octet_length(p_payload::text) > 262144 THEN
        RAISE EXCEPTION 'webhook_enqueue: payload is % bytes of JSON, over the 256 KiB limit', octet_length(p_payload::text)
            USING ERRCODE = '22023';
    END IF;
    IF p_endpoint IS NOT NULL THEN
        SELECT id INTO v_endpoint FROM webhook_endpoints WHERE name = p_endpoint;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'webhook_enqueue: no endpoint named "%"', p_endpoint USING ERRCODE = '22023';
        END IF;
    END IF;
    INSERT INTO webhook_outbox (event_type, payload, endpoint_id, headers) VALUES (p_event_type, p_payload, v_endpoint, p_headers)
        RETURNING delivery_id INTO v_id;
    RETURN v_id;
END;
$$;

DO $$
DECLARE
    old  regprocedure := to_regprocedure('webhook_enqueue(text, jsonb, text)');
    acl  aclitem[];
    g    oid;
BEGIN
    IF old IS NULL THEN
        RETURN;
    END IF;
    SELECT proacl INTO acl FROM pg_proc WHERE oid = old;
    IF acl IS NOT NULL THEN -- NULL: the default (PUBLIC may execute), which the new function has too
        REVOKE EXECUTE ON FUNCTION webhook_enqueue(text, jsonb, text, jsonb) FROM PUBLIC;
        FOR g IN SELECT DISTINCT a.grantee FROM aclexplode(acl) a WHERE a.privilege_type = 'EXECUTE' LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION webhook_enqueue(text, jsonb, text, jsonb) TO %s',
                           CASE WHEN g = 0 THEN 'PUBLIC' ELSE g::regrole::text END);
        END LOOP;
    END IF;
    DROP FUNCTION webhook_enqueue(text, jsonb, text);
END;
$$;

-- webhook_endpoint_disable (004) keeps the headers in the dead letters it
-- makes, so that `worker dlq replay` sends them again. Otherwise unchanged.
CREATE OR REPLACE FUNCTION webhook_endpoint_disable(p_id uuid, p_reason text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_name text;
    v_reason text;
    v_moved bigint;
BEGIN
    SELECT name, CASE WHEN enabled THEN p_reason ELSE coalesce(disabled_reason, p_reason) END
      INTO v_name, v_reason
      FROM webhook_endpoints WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'webhook_endpoint_disable: no endpoint with id %', p_id USING ERRCODE = '22023';
    END IF;
    UPDATE webhook_endpoints
       SET enabled = false, disabled_reason = v_reason, disabled_at = coalesce(disabled_at, now())
     WHERE id = p_id AND (enabled OR disabled_reason IS DISTINCT FROM v_reason);
    WITH moved AS (
        UPDATE webhook_outbox o SET processed = true, processed_at = now()
         WHERE NOT o.processed AND o.endpoint_id = p_id
           AND (o.locked_until IS NULL OR o.locked_until <= now())
        RETURNING o.delivery_id, o.event_type, o.payload, o.attempt, o.headers
    )
    INSERT INTO webhook_dead_letter (delivery_id, event_type, payload, attempts, last_status, last_error, endpoint_id, headers)
    SELECT delivery_id, event_type, payload, attempt - 1, NULL,
           left(format('endpoint %s disabled: %s', v_name, v_reason), 512), p_id, headers
      FROM moved;
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    RETURN v_moved;
END;
$$;
