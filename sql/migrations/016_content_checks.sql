-- 016: the rules of a pending row's content are checked when its content
-- is written, not on every update.
--
-- PostgreSQL checks every CHECK constraint of a row on every UPDATE,
-- whatever the UPDATE sets. The claim (its lease) and the record (the move
-- to history) write each delivery twice without touching its content, and
-- paid for webhook_outbox_payload_max_256kib (the payload's whole JSON
-- text, made again each time), the event type's pattern, the headers'
-- function and the ordering key's pattern every time: with a payload of
-- a few KiB and a few headers, those checks cost the database more than
-- all the rest of a delivery.
--
-- The same rules now live in one BEFORE trigger of webhook_outbox_pending,
-- webhook_content_valid, that fires on INSERT and on an UPDATE that sets
-- event_type, payload, headers or ordering_key. Its WHEN clause is the
-- rules' negation, so that a valid row costs what the constraints cost at
-- insert and the function runs only to refuse. It refuses with the same
-- SQLSTATE (23514, check_violation) and the same constraint names as
-- before, now with a message that names the column and no DETAIL (a
-- violated CHECK printed the whole row, payload included). A row that
-- moves to history is not checked again, as a row moving between
-- partitions fires no BEFORE INSERT trigger of the partition it leaves;
-- one that comes back to pending is (the BEFORE INSERT trigger of pending).
-- Its name sorts before webhook_ordering_enter's, so that a bad key is
-- refused before its lane is touched.
SET LOCAL lock_timeout = '200ms'; -- see 003: never queue producers behind a long transaction

CREATE OR REPLACE FUNCTION webhook_content_refuse() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF octet_length(NEW.payload::text) > 262144 THEN
        RAISE EXCEPTION 'webhook_outbox.payload: % bytes of JSON text, over the limit of 262144 (256 KiB)',
            octet_length(NEW.payload::text)
            USING ERRCODE = '23514', CONSTRAINT = 'webhook_outbox_payload_max_256kib';
    END IF;
    IF NEW.event_type = '' OR octet_length(NEW.event_type) > 255 OR NEW.event_type ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'webhook_outbox.event_type: must be 1 to 255 bytes without control characters'
            USING ERRCODE = '23514', CONSTRAINT = 'webhook_outbox_event_type_valid';
    END IF;
    IF NEW.headers IS NOT NULL THEN
        PERFORM webhook_headers_check(NEW.headers); -- raises, naming the header
    END IF;
    IF NEW.ordering_key = '' OR octet_length(NEW.ordering_key) > 255 OR NEW.ordering_key ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'webhook_outbox.ordering_key: must be 1 to 255 bytes without control characters'
            USING ERRCODE = '23514', CONSTRAINT = 'webhook_outbox_ordering_key_valid';
    END IF;
    RETURN NEW;
END;
$$;

ALTER TABLE webhook_outbox
    DROP CONSTRAINT IF EXISTS webhook_outbox_payload_max_256kib,
    DROP CONSTRAINT IF EXISTS webhook_outbox_event_type_valid;
ALTER TABLE webhook_outbox_pending
    DROP CONSTRAINT IF EXISTS webhook_outbox_headers_valid,
    DROP CONSTRAINT IF EXISTS webhook_outbox_ordering_key_valid;

CREATE TRIGGER webhook_content_valid
    BEFORE INSERT OR UPDATE OF event_type, payload, headers, ordering_key ON webhook_outbox_pending
    FOR EACH ROW
    WHEN (octet_length(NEW.payload::text) > 262144
          OR NEW.event_type = '' OR octet_length(NEW.event_type) > 255 OR NEW.event_type ~ '[[:cntrl:]]'
          OR NEW.headers IS NOT NULL AND webhook_headers_problem(NEW.headers) IS NOT NULL
          OR NEW.ordering_key = '' OR octet_length(NEW.ordering_key) > 255 OR NEW.ordering_key ~ '[[:cntrl:]]')
    EXECUTE FUNCTION webhook_content_refuse();
