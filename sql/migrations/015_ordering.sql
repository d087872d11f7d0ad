-- 015: ordered delivery per key.
--
-- A row with an ordering_key belongs, once it is a delivery, to a lane: its
-- endpoint (the WEBHOOK_URL endpoint's deliveries: endpoint_id NULL, fanout
-- set) and its key. A lane delivers one row at a time, in the order its
-- rows entered it (ordering_seq, 1, 2, 3, … per lane): only the lane's head
-- has held = false; every other row of the lane waits with held = true,
-- outside the claim's indexes (webhook_outbox_queue_idx and
-- webhook_outbox_env_idx now say NOT held), so that waiting rows, however
-- many, cost the claim nothing. Rows without a key never wait (held stays
-- false, no trigger runs for them).
--
--   entering a lane  (webhook_ordering_enter, BEFORE INSERT of a keyed
--                    delivery, BEFORE UPDATE that makes an event row the
--                    WEBHOOK_URL endpoint's delivery): the lane's row in
--                    webhook_ordering_lanes is locked and counts the new
--                    row's ordering_seq; the row waits when the lane has
--                    another pending row or a dead letter holding it. A
--                    retry (attempt > 1, ordering_seq kept) stays the head.
--                    A replayed dead letter (attempt 1, ordering_seq kept)
--                    is the head of a lane without one (the dead letter
--                    held it), else waits before every waiting row (they
--                    are promoted oldest sequence first). A waiting row
--                    has no lease.
--   leaving it       (webhook_ordering_leave, AFTER DELETE of the head from
--                    webhook_outbox_pending: delivered, dead-lettered or
--                    retried, all of which move it to history; and AFTER
--                    DELETE of a dead letter that held its lane): at the end
--                    of the statement, under the lane's lock, the oldest
--                    waiting row becomes the head unless the lane has a head
--                    already (a retry's new row) or a dead letter holds it.
--
-- The lane's lock (its row in webhook_ordering_lanes) orders every entry
-- and every promotion of a lane, and both read with a snapshot taken after
-- the lock, so that a row entering while the head leaves is never left
-- waiting with no head. An event (endpoint_id NULL, fanout NULL) is fanned
-- out only when no older event of its key is still waiting for its fan-out
-- (ClaimSQL), so that its deliveries enter every lane in event order.
--
-- A dead letter of a keyed delivery keeps its key and sequence;
-- order_broken says the lane moved on without it (the endpoint's ordering
-- is 'move-on', the default); with ordering 'hold' it holds its lane until
-- it is replayed or purged.

ALTER TABLE webhook_outbox
    ADD COLUMN IF NOT EXISTS ordering_key text,
    ADD COLUMN IF NOT EXISTS ordering_seq bigint,
    ADD COLUMN IF NOT EXISTS held boolean NOT NULL DEFAULT false;

-- The key travels in HTTP headers: no control characters, at most 255
-- bytes, not empty (NULL is "no key"). Pending rows only (history keeps what
-- it was given); NOT VALID: no pending row has a key yet.
ALTER TABLE webhook_outbox_pending ADD CONSTRAINT webhook_outbox_ordering_key_valid
    CHECK (ordering_key IS NULL OR (ordering_key <> '' AND octet_length(ordering_key) <= 255
                                    AND ordering_key !~ '[[:cntrl:]]')) NOT VALID;

ALTER TABLE webhook_dead_letter
    ADD COLUMN IF NOT EXISTS ordering_key text,
    ADD COLUMN IF NOT EXISTS ordering_seq bigint,
    ADD COLUMN IF NOT EXISTS order_broken boolean NOT NULL DEFAULT false;

ALTER TABLE webhook_endpoints ADD COLUMN IF NOT EXISTS ordering text NOT NULL DEFAULT 'move-on';
ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_ordering_valid CHECK (ordering IN ('move-on', 'hold'));

-- One row per lane ever used: its lock and its last sequence number. The
-- WEBHOOK_URL endpoint's lanes have the nil uuid.
CREATE TABLE IF NOT EXISTS webhook_ordering_lanes (
    endpoint_id  uuid NOT NULL,
    ordering_key text NOT NULL,
    last_seq     bigint NOT NULL,
    touched_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (endpoint_id, ordering_key)
);
SELECT webhook_copy_grants('webhook_outbox', 'webhook_ordering_lanes');

-- The claim's indexes leave waiting rows out.
DROP INDEX webhook_outbox_queue_idx, webhook_outbox_env_idx;
CREATE INDEX webhook_outbox_queue_idx ON webhook_outbox_pending (endpoint_id, created_at, id)
    WHERE NOT processed AND endpoint_id IS NOT NULL AND NOT held;
CREATE INDEX webhook_outbox_env_idx ON webhook_outbox_pending (created_at, id)
    WHERE NOT processed AND endpoint_id IS NULL AND fanout IS NOT NULL AND NOT held;
-- A lane's rows, head and waiting.
CREATE INDEX webhook_outbox_lane_idx ON webhook_outbox_pending (endpoint_id, ordering_key, held, ordering_seq)
    WHERE NOT processed AND ordering_key IS NOT NULL AND (endpoint_id IS NOT NULL OR fanout IS NOT NULL);
-- Keyed events still to fan out, by key.
CREATE INDEX webhook_outbox_keyed_events_idx ON webhook_outbox_pending (ordering_key, created_at, id)
    WHERE NOT processed AND endpoint_id IS NULL AND fanout IS NULL AND ordering_key IS NOT NULL;
-- Dead letters that hold their lane.
CREATE INDEX IF NOT EXISTS webhook_dead_letter_holding_idx ON webhook_dead_letter (endpoint_id, ordering_key)
    WHERE ordering_key IS NOT NULL AND NOT order_broken AND NOT fan_out;

-- webhook_ordering_nil is the lane endpoint of the WEBHOOK_URL endpoint.
CREATE OR REPLACE FUNCTION webhook_ordering_nil() RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$ SELECT '00000000-0000-0000-0000-000000000000'::uuid $$;

-- webhook_ordering_lock locks the lane (creating its row) and returns its
-- next sequence number when next, else its last.
CREATE OR REPLACE FUNCTION webhook_ordering_lock(p_endpoint uuid, p_key text, p_next boolean, p_at_least bigint)
RETURNS bigint LANGUAGE sql AS $$
    INSERT INTO webhook_ordering_lanes AS l (endpoint_id, ordering_key, last_seq)
    VALUES (coalesce(p_endpoint, webhook_ordering_nil()), p_key, CASE WHEN p_next THEN 1 ELSE coalesce(p_at_least, 0) END)
    ON CONFLICT (endpoint_id, ordering_key) DO UPDATE
        SET last_seq = CASE WHEN p_next THEN l.last_seq + 1 ELSE greatest(l.last_seq, coalesce(p_at_least, 0)) END,
            touched_at = now()
    RETURNING last_seq
$$;

-- webhook_ordering_has_head: the lane has a head (a pending row not
-- waiting).
CREATE OR REPLACE FUNCTION webhook_ordering_has_head(p_endpoint uuid, p_key text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF p_endpoint IS NULL THEN
        RETURN EXISTS (SELECT 1 FROM webhook_outbox_pending o
            WHERE NOT o.processed AND o.ordering_key = p_key AND o.endpoint_id IS NULL AND o.fanout IS NOT NULL AND NOT o.held);
    END IF;
    RETURN EXISTS (SELECT 1 FROM webhook_outbox_pending o
        WHERE NOT o.processed AND o.ordering_key = p_key AND o.endpoint_id = p_endpoint AND NOT o.held);
END;
$$;

-- webhook_ordering_busy: the lane has a pending row, or a dead letter
-- holding it.
CREATE OR REPLACE FUNCTION webhook_ordering_busy(p_endpoint uuid, p_key text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF p_endpoint IS NULL THEN
        RETURN EXISTS (SELECT 1 FROM webhook_outbox_pending o
                WHERE NOT o.processed AND o.ordering_key = p_key AND o.endpoint_id IS NULL AND o.fanout IS NOT NULL)
            OR EXISTS (SELECT 1 FROM webhook_dead_letter d
                WHERE d.ordering_key = p_key AND d.endpoint_id IS NULL AND NOT d.order_broken AND NOT d.fan_out);
    END IF;
    RETURN EXISTS (SELECT 1 FROM webhook_outbox_pending o
            WHERE NOT o.processed AND o.ordering_key = p_key AND o.endpoint_id = p_endpoint)
        OR EXISTS (SELECT 1 FROM webhook_dead_letter d
            WHERE d.ordering_key = p_key AND d.endpoint_id = p_endpoint AND NOT d.order_broken AND NOT d.fan_out);
END;
$$;

CREATE OR REPLACE FUNCTION webhook_ordering_enter() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- The lane's state is read after its lock, with a snapshot of that
    -- moment: only READ COMMITTED takes one per statement.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'webhook_outbox.ordering_key: a row with an ordering key must be inserted in a READ COMMITTED transaction (this one is %)',
            upper(current_setting('transaction_isolation')) USING ERRCODE = '0A000';
    END IF;
    IF NEW.ordering_seq IS NULL THEN
        -- A new row of the lane: last in line.
        NEW.ordering_seq := webhook_ordering_lock(NEW.endpoint_id, NEW.ordering_key, true, NULL);
        NEW.held := webhook_ordering_busy(NEW.endpoint_id, NEW.ordering_key);
    ELSIF NEW.attempt > 1 THEN
        -- A retry: the head keeps its place (the row it replaces leaves in
        -- the same statement).
        NEW.held := false;
    ELSE
        -- A replayed dead letter: before every row that waits in its lane
        -- (the oldest waiting row is promoted first); after the lane's
        -- head, if it has one. It never takes the head's place: the head
        -- may be leased at this very moment.
        PERFORM webhook_ordering_lock(NEW.endpoint_id, NEW.ordering_key, false, NEW.ordering_seq);
        NEW.held := webhook_ordering_has_head(NEW.endpoint_id, NEW.ordering_key);
    END IF;
    IF NEW.held THEN
        NEW.locked_until := NULL;
        NEW.lease_token := NULL;
    END IF;
    RETURN NEW;
END;
$$;

-- webhook_ordering_promote makes the lane's oldest waiting row its head,
-- unless it has one or a dead letter holds it; one function, no nested
-- calls: it runs once for every keyed delivery that leaves its lane.
CREATE OR REPLACE FUNCTION webhook_ordering_promote(p_endpoint uuid, p_key text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_next bigint;
BEGIN
    -- The lane's lock, without a new version of its row (the record has
    -- usually taken it already, in order, for all its lanes).
    PERFORM 1 FROM webhook_ordering_lanes l
    WHERE l.endpoint_id = coalesce(p_endpoint, webhook_ordering_nil()) AND l.ordering_key = p_key
    FOR NO KEY UPDATE;
    IF p_endpoint IS NULL THEN
        IF EXISTS (SELECT 1 FROM webhook_outbox_pending o
                   WHERE NOT o.processed AND o.ordering_key = p_key AND o.endpoint_id IS NULL AND o.fanout IS NOT NULL AND NOT o.held)
           OR EXISTS (SELECT 1 FROM webhook_dead_letter d
                      WHERE d.ordering_key = p_key AND d.endpoint_id IS NULL AND NOT d.order_broken AND NOT d.fan_out) THEN
            RETURN;
        END IF;
        SELECT w.id INTO v_next FROM webhook_outbox_pending w
        WHERE NOT w.processed AND w.ordering_key = p_key AND w.endpoint_id IS NULL AND w.fanout IS NOT NULL AND w.held
        ORDER BY w.ordering_seq LIMIT 1;
    ELSE
        IF EXISTS (SELECT 1 FROM webhook_outbox_pending o
                   WHERE NOT o.processed AND o.ordering_key = p_key AND o.endpoint_id = p_endpoint AND NOT o.held)
           OR EXISTS (SELECT 1 FROM webhook_dead_letter d
                      WHERE d.ordering_key = p_key AND d.endpoint_id = p_endpoint AND NOT d.order_broken AND NOT d.fan_out) THEN
            RETURN;
        END IF;
        SELECT w.id INTO v_next FROM webhook_outbox_pending w
        WHERE NOT w.processed AND w.ordering_key = p_key AND w.endpoint_id = p_endpoint AND w.held
        ORDER BY w.ordering_seq LIMIT 1;
    END IF;
    IF v_next IS NOT NULL THEN
        UPDATE webhook_outbox_pending SET held = false WHERE id = v_next;
    END IF;
END;
$$;

CREATE OR REPLACE FUNCTION webhook_ordering_leave() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM webhook_ordering_promote(OLD.endpoint_id, OLD.ordering_key);
    RETURN NULL;
END;
$$;

DROP TRIGGER IF EXISTS webhook_ordering_enter ON webhook_outbox;
CREATE TRIGGER webhook_ordering_enter BEFORE INSERT ON webhook_outbox
    FOR EACH ROW
    WHEN (NEW.ordering_key IS NOT NULL AND NOT NEW.processed AND (NEW.endpoint_id IS NOT NULL OR NEW.fanout IS NOT NULL))
    EXECUTE FUNCTION webhook_ordering_enter();
DROP TRIGGER IF EXISTS webhook_ordering_enter_env ON webhook_outbox;
CREATE TRIGGER webhook_ordering_enter_env BEFORE UPDATE OF fanout ON webhook_outbox
    FOR EACH ROW
    WHEN (NEW.ordering_key IS NOT NULL AND NOT NEW.processed AND NEW.endpoint_id IS NULL
          AND OLD.fanout IS NULL AND NEW.fanout IS NOT NULL)
    EXECUTE FUNCTION webhook_ordering_enter();
DROP TRIGGER IF EXISTS webhook_ordering_leave ON webhook_outbox_pending;
CREATE TRIGGER webhook_ordering_leave AFTER DELETE ON webhook_outbox_pending
    FOR EACH ROW
    WHEN (OLD.ordering_key IS NOT NULL AND NOT OLD.held AND (OLD.endpoint_id IS NOT NULL OR OLD.fanout IS NOT NULL)
          AND current_setting('fluxora.lanes', true) IS DISTINCT FROM 'record')
    EXECUTE FUNCTION webhook_ordering_leave();
DROP TRIGGER IF EXISTS webhook_ordering_release ON webhook_dead_letter;
CREATE TRIGGER webhook_ordering_release AFTER DELETE ON webhook_dead_letter
    FOR EACH ROW
    WHEN (OLD.ordering_key IS NOT NULL AND NOT OLD.order_broken AND NOT OLD.fan_out)
    EXECUTE FUNCTION webhook_ordering_leave();

-- webhook_endpoint_disable (007) keeps each row's key and sequence in the
-- dead letters it makes; under 'move-on' they say they broke their order,
-- under 'hold' they hold their lanes until replayed or purged. Otherwise
-- unchanged.
CREATE OR REPLACE FUNCTION webhook_endpoint_disable(p_id uuid, p_reason text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_name text;
    v_reason text;
    v_hold boolean;
    v_moved bigint;
BEGIN
    SELECT name, CASE WHEN enabled THEN p_reason ELSE coalesce(disabled_reason, p_reason) END, ordering = 'hold'
      INTO v_name, v_reason, v_hold
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
    RETURN v_moved;
END;
$$;

-- webhook_enqueue gains ordering_key (named so: webhook_enqueue('order.paid',
-- payload, ordering_key => 'order-42')). Otherwise unchanged (007).
CREATE OR REPLACE FUNCTION webhook_enqueue(p_event_type text, p_payload jsonb, p_endpoint text DEFAULT NULL,
                                           p_headers jsonb DEFAULT NULL, ordering_key text DEFAULT NULL) RETURNS uuid
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
    IF webhook_enqueue.ordering_key IS NOT NULL AND (webhook_enqueue.ordering_key = ''
            OR octet_length(webhook_enqueue.ordering_key) > 255 OR webhook_enqueue.ordering_key ~ '[[:cntrl:]]') THEN
        RAISE EXCEPTION 'webhook_enqueue: ordering_key must be 1 to 255 bytes without control characters (NULL: unordered)'
            USING ERRCODE = '22023';
    END IF;
    IF p_endpoint IS NOT NULL THEN
        SELECT id INTO v_endpoint FROM webhook_endpoints WHERE name = p_endpoint;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'webhook_enqueue: no endpoint named "%"', p_endpoint USING ERRCODE = '22023';
        END IF;
    END IF;
    INSERT INTO webhook_outbox (event_type, payload, endpoint_id, headers, ordering_key)
        VALUES (p_event_type, p_payload, v_endpoint, p_headers, webhook_enqueue.ordering_key)
        RETURNING delivery_id INTO v_id;
    RETURN v_id;
END;
$$;

DO $$
DECLARE
    old  regprocedure := to_regprocedure('webhook_enqueue(text, jsonb, text, jsonb)');
    acl  aclitem[];
    g    oid;
BEGIN
    IF old IS NULL THEN
        RETURN;
    END IF;
    SELECT proacl INTO acl FROM pg_proc WHERE oid = old;
    IF acl IS NOT NULL THEN -- NULL: the default (PUBLIC may execute), which the new function has too
        REVOKE EXECUTE ON FUNCTION webhook_enqueue(text, jsonb, text, jsonb, text) FROM PUBLIC;
        FOR g IN SELECT DISTINCT a.grantee FROM aclexplode(acl) a WHERE a.privilege_type = 'EXECUTE' LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION webhook_enqueue(text, jsonb, text, jsonb, text) TO %s',
                           CASE WHEN g = 0 THEN 'PUBLIC' ELSE g::regrole::text END);
        END LOOP;
    END IF;
    DROP FUNCTION webhook_enqueue(text, jsonb, text, jsonb);
END;
$$;
