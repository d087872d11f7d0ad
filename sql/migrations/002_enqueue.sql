-- 002: webhook_enqueue(event_type, payload) for producers in any language.
-- Call it inside the transaction of the business change; it returns the
-- event's delivery id (the consumer's x-fluxora-delivery-id). Its errors name
-- the problem; the table's constraints stay the last line of defence.
CREATE OR REPLACE FUNCTION webhook_enqueue(p_event_type text, p_payload jsonb) RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
    v_id uuid;
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
    INSERT INTO webhook_outbox (event_type, payload) VALUES (p_event_type, p_payload) RETURNING delivery_id INTO v_id;
    RETURN v_id;
END;
$$;
