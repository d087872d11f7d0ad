-- 029: the event catalog (docs/event-types.md): the event types the
-- producers write, each with a description, an optional JSON Schema of its
-- payload, an example and a deprecated flag; and strict mode, which
-- refuses a producer's event of a type the catalog does not list.
--
-- webhook_event_types is written by `worker event-types` (or by hand, or a
-- producer's own migration): the worker reads it, never the claim. The
-- JSON Schema is checked by the worker and the producer kit (the database
-- has no validator); here only its shape (an object or a boolean, as JSON
-- Schema allows) and its size.
--
-- webhook_event_catalog is one row: strict (`worker event-types strict
-- on|off`) and version, which every change of webhook_event_types bumps
-- (a statement trigger), so that a worker notices a change with one read
-- of one row and reloads the catalog only then.
--
-- webhook_event_type_problem(p_type) is the strict rule, the one the
-- worker applies too (package eventtypes, Catalog.Problem, with the same
-- text): while strict is on, a type the catalog does not list is refused,
-- but the worker's own (fluxora.…, 024), which are always known. The
-- trigger webhook_content_valid_type applies it to a producer's event as
-- it is inserted (or its type changed), in the producer's transaction. It
-- is a trigger of its own beside 016's webhook_content_valid, which fires
-- first (names sort so) and refuses a malformed type before this one reads
-- the catalog. Like 016's, its WHEN clause is the rule's negation, and the
-- function runs only to refuse.
--
-- Only events are checked at insert (endpoint_id and fanout NULL: a
-- producer's plain INSERT, webhook_enqueue, producer.Enqueue), never the
-- rows the worker writes (deliveries of a fan-out, retries, replays):
-- those copy an event already accepted, and a type removed from the
-- catalog since, or an event written before strict was turned on, must
-- not make the worker's claim or record fail. The worker applies the
-- same rule to every delivery before its first attempt and dead-letters
-- the ones it refuses, with the same text: so is a row a producer targets
-- at one endpoint (endpoint_id set), which this trigger cannot tell from
-- a fan-out's delivery.
--
-- Online: two new tables and a trigger on webhook_outbox_pending that
-- finds strict off in one read; workers of the previous release run
-- unchanged (they neither validate nor read the catalog).
SET LOCAL lock_timeout = '200ms'; -- see 003: never queue producers behind a long transaction

CREATE TABLE IF NOT EXISTS webhook_event_types (
    -- The type, as producers write it in webhook_outbox.event_type: its
    -- rule, and no "*" (that is a subscription's pattern) nor the worker's
    -- own prefix (fluxora.…, always known).
    name        text        PRIMARY KEY,
    description text        NOT NULL DEFAULT '',
    -- The JSON Schema (draft 2020-12 unless it says otherwise) of the
    -- payload; NULL: any JSON.
    schema      jsonb,
    -- An example payload, shown to consumers (the OpenAPI export).
    example     jsonb,
    -- A deprecated type is still accepted; consumers are told.
    deprecated  boolean     NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT webhook_event_types_name_valid CHECK (name <> '' AND octet_length(name) <= 255 AND name !~ '[[:cntrl:]*]'
        AND NOT starts_with(name, 'fluxora.')),
    CONSTRAINT webhook_event_types_description_max CHECK (octet_length(description) <= 4096),
    CONSTRAINT webhook_event_types_schema_valid CHECK (jsonb_typeof(schema) IN ('object', 'boolean')
        AND octet_length(schema::text) <= 262144),
    CONSTRAINT webhook_event_types_example_max CHECK (octet_length(example::text) <= 262144)
);

CREATE TABLE IF NOT EXISTS webhook_event_catalog (
    one     boolean PRIMARY KEY DEFAULT true CHECK (one),
    strict  boolean NOT NULL DEFAULT false,
    version bigint  NOT NULL DEFAULT 0
);
INSERT INTO webhook_event_catalog (one) VALUES (true) ON CONFLICT DO NOTHING;

-- Every change of the types bumps the version (once a statement) and
-- their updated_at.
CREATE OR REPLACE FUNCTION webhook_event_types_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE webhook_event_catalog SET version = version + 1;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION webhook_event_types_touch() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at := now();
    RETURN NEW;
END;
$$;

DROP TRIGGER IF EXISTS webhook_event_types_changed ON webhook_event_types;
CREATE TRIGGER webhook_event_types_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON webhook_event_types
    FOR EACH STATEMENT EXECUTE FUNCTION webhook_event_types_changed();

DROP TRIGGER IF EXISTS webhook_event_types_touch ON webhook_event_types;
CREATE TRIGGER webhook_event_types_touch
    BEFORE UPDATE ON webhook_event_types
    FOR EACH ROW EXECUTE FUNCTION webhook_event_types_touch();

-- The strict rule: why an event of type p_type may not be written, or
-- NULL. PL/pgSQL, so that its reads keep their plans for the session.
-- STABLE, so its reads see the calling statement's snapshot: a producer's
-- INSERT that took its snapshot before this migration committed (it then
-- waited for the partition's lock) finds no row of webhook_event_catalog,
-- which is strict off.
CREATE OR REPLACE FUNCTION webhook_event_type_problem(p_type text) RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF starts_with(p_type, 'fluxora.') OR NOT coalesce((SELECT c.strict FROM webhook_event_catalog c), false)
       OR EXISTS (SELECT 1 FROM webhook_event_types t WHERE t.name = p_type) THEN
        RETURN NULL;
    END IF;
    RETURN format('unknown event type %s: the event catalog is strict', p_type);
END;
$$;

-- The refusal. It asks the rule again (a trigger function takes a snapshot
-- of its own): a type added, or strict turned off, since the statement's
-- snapshot lets the row in.
CREATE OR REPLACE FUNCTION webhook_event_type_refuse() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    problem text := webhook_event_type_problem(NEW.event_type);
BEGIN
    IF problem IS NULL THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'webhook_outbox.event_type: %', problem
        USING ERRCODE = '23514', CONSTRAINT = 'webhook_outbox_event_type_known';
END;
$$;

DROP TRIGGER IF EXISTS webhook_content_valid_type ON webhook_outbox_pending;
CREATE TRIGGER webhook_content_valid_type
    BEFORE INSERT OR UPDATE OF event_type ON webhook_outbox_pending
    FOR EACH ROW
    WHEN (NEW.endpoint_id IS NULL AND NEW.fanout IS NULL AND webhook_event_type_problem(NEW.event_type) IS NOT NULL)
    EXECUTE FUNCTION webhook_event_type_refuse();
