-- 025: operator events (docs/operator-events.md): the worker writes events
-- of its own into webhook_outbox, in the transaction of the change that
-- causes them, and they are fanned out, signed and delivered like any
-- event, to the endpoints that subscribe to them by name (024: an
-- every-type endpoint and the WEBHOOK_URL endpoint never take a fluxora.…
-- type).
--
--   fluxora.endpoint.disabled              webhook_endpoint_disable, below
--   fluxora.endpoint.enabled               `worker endpoints enable` (queries/catalog.sql)
--   fluxora.endpoint.failing               the record (queries/record.sql), at most once an hour
--   fluxora.endpoint.recovered             the record
--   fluxora.delivery.exhausted             the record's dead letters
--   fluxora.endpoint.certificate_expiring  the janitor (queries/janitor.sql), at most once a day
--
-- An event is written only when an enabled endpoint subscribes to its type
-- by name, and never about an endpoint that subscribes to a fluxora.… type
-- itself (its own failing, disabling, …), nor for a dead letter whose type
-- is fluxora.…: an operator event never causes another.
--
-- Online: two nullable columns without a default (catalog only) and
-- functions. Workers of the previous release run unchanged (they write no
-- operator event; webhook_endpoint_disable, which they call too, writes
-- the disabled one for them).
SET LOCAL lock_timeout = '200ms'; -- see 003: never queue producers behind a long transaction

-- When the last fluxora.endpoint.failing, and the last
-- fluxora.endpoint.certificate_expiring, about the endpoint was written.
ALTER TABLE webhook_endpoints ADD COLUMN IF NOT EXISTS failing_noted_at timestamptz;
ALTER TABLE webhook_endpoints ADD COLUMN IF NOT EXISTS certificate_noted_at timestamptz;

-- webhook_operator_subscriber says whether a list of event types names a
-- fluxora.… type (exactly or by a pattern starting with "fluxora.").
CREATE OR REPLACE FUNCTION webhook_operator_subscriber(p_types text[]) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT strpos(E'\n' || array_to_string(p_types, E'\n'), E'\nfluxora.') > 0
$$;

-- webhook_operator_wanted says whether an event of type p_type about the
-- endpoint p_subject (NULL: the WEBHOOK_URL endpoint) is written: the
-- subject subscribes to no fluxora.… type, and an enabled endpoint
-- subscribes to p_type (webhook_subscribed on its non-empty list). It
-- reads the endpoints only when called: callers call it when something
-- happened, never on every record.
CREATE OR REPLACE FUNCTION webhook_operator_wanted(p_type text, p_subject uuid) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT NOT EXISTS (SELECT 1 FROM webhook_endpoints s WHERE s.id = p_subject AND webhook_operator_subscriber(s.event_types))
       AND EXISTS (SELECT 1 FROM webhook_endpoints e
                    WHERE e.enabled AND cardinality(e.event_types) > 0 AND webhook_subscribed(e.event_types, p_type))
$$;

-- webhook_operator_time is a time as the payloads write it: RFC 3339, UTC,
-- microseconds, whatever the session's time zone.
CREATE OR REPLACE FUNCTION webhook_operator_time(p_at timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;

-- webhook_operator_event writes the event p_type about the endpoint
-- p_subject when webhook_operator_wanted says so, and returns its
-- delivery_id (NULL: none written). Its payload is p_payload with the
-- endpoint's name ("endpoint") and the time ("occurred_at", the
-- transaction's) added, and the keys whose value is null left out.
CREATE OR REPLACE FUNCTION webhook_operator_event(p_type text, p_subject uuid, p_payload jsonb) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_id uuid;
BEGIN
    IF NOT webhook_operator_wanted(p_type, p_subject) THEN
        RETURN NULL;
    END IF;
    INSERT INTO webhook_outbox (event_type, payload)
    VALUES (p_type, jsonb_strip_nulls(jsonb_build_object(
                'endpoint', (SELECT name FROM webhook_endpoints WHERE id = p_subject),
                'occurred_at', webhook_operator_time(now())) || coalesce(p_payload, '{}')))
    RETURNING delivery_id INTO v_id;
    RETURN v_id;
END;
$$;

-- webhook_health_event is the record's step for an endpoint whose health
-- it changed (queries/record.sql, step endpoints, which calls it only
-- then): p_e is the endpoint as the record left it. A success after
-- failures (p_ok) writes fluxora.endpoint.recovered; the first failure
-- after a healthy stretch fluxora.endpoint.failing, unless one was written
-- less than an hour ago (failing_noted_at, set when one is written).
CREATE OR REPLACE FUNCTION webhook_health_event(p_e webhook_endpoints, p_ok boolean, p_console_url text) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_id uuid;
BEGIN
    IF p_ok THEN
        RETURN webhook_operator_event('fluxora.endpoint.recovered', p_e.id, jsonb_build_object(
            'last_error', p_e.last_error, 'last_status', p_e.last_status,
            'last_error_at', webhook_operator_time(p_e.last_error_at), 'console_url', nullif(p_console_url, '')));
    END IF;
    IF p_e.failing_noted_at > now() - interval '1 hour' THEN
        RETURN NULL;
    END IF;
    v_id := webhook_operator_event('fluxora.endpoint.failing', p_e.id, jsonb_build_object(
        'failing_since', webhook_operator_time(p_e.failing_since), 'last_error', p_e.last_error,
        'last_status', p_e.last_status, 'console_url', nullif(p_console_url, '')));
    IF v_id IS NOT NULL THEN
        UPDATE webhook_endpoints SET failing_noted_at = now() WHERE id = p_e.id;
    END IF;
    RETURN v_id;
END;
$$;

-- webhook_exhausted_event is the record's step for a delivery it
-- dead-lettered after its last attempt (queries/record.sql, step dead,
-- which calls it for a type not fluxora.… only): p_id is the dead letter's
-- id. It writes fluxora.delivery.exhausted with the dead letter's delivery,
-- type, attempts and last answer, never its payload or headers.
CREATE OR REPLACE FUNCTION webhook_exhausted_event(p_id bigint, p_console_url text) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    d record;
BEGIN
    SELECT delivery_id, event_type, endpoint_id, attempts, last_status, last_error
      INTO d
      FROM webhook_dead_letter WHERE id = p_id;
    IF NOT FOUND OR starts_with(d.event_type, 'fluxora.') THEN
        RETURN NULL;
    END IF;
    RETURN webhook_operator_event('fluxora.delivery.exhausted', d.endpoint_id, jsonb_build_object(
        'delivery_id', d.delivery_id, 'event_type', d.event_type, 'attempts', d.attempts,
        'last_status', d.last_status, 'last_error', d.last_error, 'console_url', nullif(p_console_url, '')));
END;
$$;

-- webhook_endpoint_disable (015) also writes fluxora.endpoint.disabled
-- when it disables an enabled endpoint, with the reason, how many pending
-- deliveries moved, and the endpoint's run of failures; its console_url
-- comes from the transaction's setting fluxora.console_url (the worker
-- sets it before calling). Otherwise unchanged.
CREATE OR REPLACE FUNCTION webhook_endpoint_disable(p_id uuid, p_reason text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_name text;
    v_reason text;
    v_hold boolean;
    v_was_enabled boolean;
    v_failing_since timestamptz;
    v_last_error text;
    v_last_status int;
    v_moved bigint;
BEGIN
    SELECT name, CASE WHEN enabled THEN p_reason ELSE coalesce(disabled_reason, p_reason) END, ordering = 'hold', enabled,
           failing_since, last_error, last_status
      INTO v_name, v_reason, v_hold, v_was_enabled, v_failing_since, v_last_error, v_last_status
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
        RETURNING o.delivery_id, o.event_type, o.payload, o.attempt, o.headers, o.ordering_key, o.ordering_seq
    )
    INSERT INTO webhook_dead_letter (delivery_id, event_type, payload, attempts, last_status, last_error, endpoint_id, headers,
                                     ordering_key, ordering_seq, order_broken)
    SELECT delivery_id, event_type, payload, attempt - 1, NULL,
           left(format('endpoint %s disabled: %s', v_name, v_reason), 512), p_id, headers,
           ordering_key, ordering_seq, ordering_key IS NOT NULL AND NOT v_hold
      FROM moved;
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    IF v_was_enabled THEN
        PERFORM webhook_operator_event('fluxora.endpoint.disabled', p_id, jsonb_build_object(
            'reason', v_reason, 'moved', v_moved, 'failing_since', webhook_operator_time(v_failing_since),
            'last_error', v_last_error, 'last_status', v_last_status,
            'console_url', nullif(current_setting('fluxora.console_url', true), '')));
    END IF;
    RETURN v_moved;
END;
$$;
