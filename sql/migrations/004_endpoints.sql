-- 004: endpoints. Many consumers, each with its own URL, secret and event
-- subscriptions. An outbox row with endpoint_id NULL is an event for every
-- enabled endpoint subscribed to its type (and for the WEBHOOK_URL endpoint
-- of the environment, when a worker has one); a row with endpoint_id set is
-- for that endpoint only.
--
-- Fan-out happens in the worker's claim, once per event and in one
-- statement: it inserts one delivery row per subscribed endpoint and sets
-- the event row's fanout to the number of deliveries made (the event row
-- itself becomes the WEBHOOK_URL delivery, or is marked processed). fanout
-- NULL on an endpoint_id NULL row means "not fanned out yet"; a processed
-- row with endpoint_id NULL and fanout 0 was unrouted (no endpoint at all).

SET LOCAL lock_timeout = '200ms'; -- see 003: never queue producers behind a long transaction

-- webhook_url_problem says why u is not an acceptable endpoint URL, or NULL
-- when it is: https, or http only to a loopback host; a host; a port in
-- 1-65535; no credentials, no fragment, no whitespace or control characters.
-- The same rules as WEBHOOK_URL (sender.ValidateURL). Its texts never quote u.
CREATE OR REPLACE FUNCTION webhook_url_problem(u text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    m         text[];
    scheme    text;
    authority text;
    host      text;
    port      text;
BEGIN
    IF u IS NULL OR u = '' THEN
        RETURN 'must not be empty';
    END IF;
    IF u ~ '[[:cntrl:][:space:]]' THEN
        RETURN 'is not a valid URL';
    END IF;
    m := regexp_match(u, '^([A-Za-z][A-Za-z0-9+.-]*)://([^/?#]*)');
    IF m IS NULL THEN
        RETURN 'must be an absolute URL';
    END IF;
    scheme := lower(m[1]);
    authority := m[2];
    IF position('@' IN authority) > 0 THEN
        RETURN 'must not contain credentials';
    END IF;
    IF position('#' IN u) > 0 THEN
        RETURN 'must not contain a fragment';
    END IF;
    IF left(authority, 1) = '[' THEN
        m := regexp_match(authority, '^\[([0-9A-Fa-f:.]*)\](?::([0-9]*))?$');
    ELSE
        m := regexp_match(authority, '^([^:\[\]]*)(?::([0-9]*))?$');
    END IF;
    IF m IS NULL THEN
        RETURN 'is not a valid URL';
    END IF;
    host := m[1];
    port := m[2];
    IF host = '' THEN
        RETURN 'must have a host';
    END IF;
    IF port IS NOT NULL AND port <> '' AND (length(port) > 5 OR port::int < 1 OR port::int > 65535) THEN
        RETURN 'must have a port between 1 and 65535';
    END IF;
    IF scheme = 'https' THEN
        RETURN NULL;
    END IF;
    IF scheme = 'http' AND (lower(host) = 'localhost'
            OR host ~ '^127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$'
            OR host = '::1' OR lower(host) ~ '^::ffff:127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$') THEN
        RETURN NULL;
    END IF;
    RETURN 'must be https (http only for a loopback host)';
END;
$$;

-- webhook_event_types_valid: every subscribed type follows the rule of
-- webhook_outbox.event_type.
CREATE OR REPLACE FUNCTION webhook_event_types_valid(types text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(bool_and(t IS NOT NULL AND t <> '' AND octet_length(t) <= 255 AND t !~ '[[:cntrl:]]'), true)
    FROM unnest(types) AS t
$$;

CREATE TABLE IF NOT EXISTS webhook_endpoints (
    id              uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    -- The name travels in the x-fluxora-endpoint header and the endpoint
    -- metric label: short and plain.
    name            text        UNIQUE NOT NULL,
    url             text        NOT NULL,
    secret          text        NOT NULL,
    -- Empty: every event type.
    event_types     text[]      NOT NULL DEFAULT '{}',
    enabled         boolean     NOT NULL DEFAULT true,
    disabled_reason text,
    -- Overrides WEBHOOK_RETRY_RPS for this endpoint when set.
    retry_rps       integer,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    -- Health, written by workers only on a change (first failure after a
    -- success, first success after failures, at most one error a second):
    -- failing_since is when the current run of failed attempts began.
    failing_since   timestamptz,
    last_error      text,
    last_status     integer,
    last_error_at   timestamptz,
    disabled_at     timestamptz,
    CONSTRAINT webhook_endpoints_name_valid CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
    CONSTRAINT webhook_endpoints_url_valid CHECK (webhook_url_problem(url) IS NULL),
    CONSTRAINT webhook_endpoints_secret_not_empty CHECK (secret <> ''),
    CONSTRAINT webhook_endpoints_event_types_valid CHECK (webhook_event_types_valid(event_types)),
    CONSTRAINT webhook_endpoints_retry_rps_positive CHECK (retry_rps IS NULL OR retry_rps >= 1)
);

-- A plain INSERT or UPDATE with bad values fails with a message that names
-- the column and the rule. The CHECKs above stay the last line of defence,
-- but their message would name only the constraint, and its DETAIL would
-- print the whole row, secret included. Every change bumps updated_at.
CREATE OR REPLACE FUNCTION webhook_endpoints_check() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    problem text := webhook_url_problem(NEW.url);
BEGIN
    IF NEW.name IS NULL OR NEW.name !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$' THEN
        RAISE EXCEPTION 'webhook_endpoints.name: must be 1-64 letters, digits, ".", "_" or "-", starting with a letter or digit'
            USING ERRCODE = '23514', CONSTRAINT = 'webhook_endpoints_name_valid';
    END IF;
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'webhook_endpoints.url of endpoint "%": %', NEW.name, problem
            USING ERRCODE = '23514', CONSTRAINT = 'webhook_endpoints_url_valid';
    END IF;
    IF NEW.secret IS NULL OR NEW.secret = '' THEN
        RAISE EXCEPTION 'webhook_endpoints.secret of endpoint "%": must not be empty', NEW.name
            USING ERRCODE = '23514', CONSTRAINT = 'webhook_endpoints_secret_not_empty';
    END IF;
    IF NEW.event_types IS NULL OR NOT webhook_event_types_valid(NEW.event_types) THEN
        RAISE EXCEPTION 'webhook_endpoints.event_types of endpoint "%": each type must be 1-255 bytes without control characters', NEW.name
            USING ERRCODE = '23514', CONSTRAINT = 'webhook_endpoints_event_types_valid';
    END IF;
    IF NEW.retry_rps IS NOT NULL AND NEW.retry_rps < 1 THEN
        RAISE EXCEPTION 'webhook_endpoints.retry_rps of endpoint "%": must be at least 1', NEW.name
            USING ERRCODE = '23514', CONSTRAINT = 'webhook_endpoints_retry_rps_positive';
    END IF;
    IF TG_OP = 'UPDATE' THEN
        NEW.updated_at := now();
    END IF;
    RETURN NEW;
END;
$$;

DROP TRIGGER IF EXISTS webhook_endpoints_check ON webhook_endpoints;
CREATE TRIGGER webhook_endpoints_check
    BEFORE INSERT OR UPDATE OF url, name, secret, event_types, enabled, retry_rps ON webhook_endpoints
    FOR EACH ROW EXECUTE FUNCTION webhook_endpoints_check();

-- Catalog-only: nullable columns without a default. The foreign key is
-- added NOT VALID (no scan under the table lock) and validated by 005.
ALTER TABLE webhook_outbox
    ADD COLUMN IF NOT EXISTS endpoint_id uuid,
    ADD COLUMN IF NOT EXISTS fanout      integer;

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'webhook_outbox_endpoint_id_fkey') THEN
        ALTER TABLE webhook_outbox ADD CONSTRAINT webhook_outbox_endpoint_id_fkey
            FOREIGN KEY (endpoint_id) REFERENCES webhook_endpoints (id) ON DELETE CASCADE NOT VALID;
    END IF;
END;
$$;

-- A dead letter remembers its endpoint (NULL: the WEBHOOK_URL endpoint), so
-- that a replay goes to that endpoint only. No foreign key: a dead letter
-- outlives a removed endpoint, and a replay refuses it by name.
ALTER TABLE webhook_dead_letter
    ADD COLUMN IF NOT EXISTS endpoint_id uuid;

-- webhook_endpoint_disable disables an endpoint and moves its pending
-- deliveries (due or scheduled, not those a worker holds under a live lease:
-- their outcome is recorded, and a retry of theirs is dead-lettered when it
-- falls due) to webhook_dead_letter with the reason, in one transaction.
-- `worker endpoints enable` then `worker dlq replay --endpoint NAME`
-- recovers every one. Returns the number moved; already disabled endpoints
-- keep their first reason.
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
        RETURNING o.delivery_id, o.event_type, o.payload, o.attempt
    )
    INSERT INTO webhook_dead_letter (delivery_id, event_type, payload, attempts, last_status, last_error, endpoint_id)
    SELECT delivery_id, event_type, payload, attempt - 1, NULL,
           left(format('endpoint %s disabled: %s', v_name, v_reason), 512), p_id
      FROM moved;
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    RETURN v_moved;
END;
$$;

-- webhook_enqueue gains an optional endpoint (its name): the event then goes
-- to that endpoint only. Dropped and re-created: a second overload would
-- make two-argument calls ambiguous.
DROP FUNCTION IF EXISTS webhook_enqueue(text, jsonb);
CREATE OR REPLACE FUNCTION webhook_enqueue(p_event_type text, p_payload jsonb, p_endpoint text DEFAULT NULL) RETURNS uuid
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
    INSERT INTO webhook_outbox (event_type, payload, endpoint_id) VALUES (p_event_type, p_payload, v_endpoint)
        RETURNING delivery_id INTO v_id;
    RETURN v_id;
END;
$$;
