-- 020: a per-event header's name is judged reserved after "_" is read as
-- "-". Servers behind CGI or WSGI see every header as an HTTP_* variable,
-- where "Webhook_Signature" and "webhook-signature" are the same
-- HTTP_WEBHOOK_SIGNATURE, and some proxies rewrite "_" into "-": a
-- producer could give such a consumer a second, forged webhook-signature
-- (or x-fluxora-event, host, transfer-encoding...). The worker's rules in
-- Go (package eventheaders) fold the same way, tested side by side with
-- this function.
--
-- Only webhook_headers_problem changes: the trigger webhook_content_valid
-- (016) calls it by name, on insert and on an update of the headers. Rows already
-- pending with such a header are left as they are: the sender checks the
-- headers again before each request and dead-letters such a row at its
-- next attempt as a broken row, naming the header and sending nothing. A
-- replay of that dead letter is refused at insert with the same text.
-- Header names that differ only by "_" and "-" and are not reserved
-- (x_trace and x-trace) are still two headers, as before.
SET LOCAL lock_timeout = '200ms'; -- see 003: never queue producers behind a long transaction

-- webhook_headers_problem as in 007, with the reserved names compared on
-- the lower-case name with "_" read as "-" (fk).
CREATE OR REPLACE FUNCTION webhook_headers_problem(h jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    k      text;
    v      jsonb;
    s      text;
    lk     text;
    fk     text;
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
        fk := translate(lk, '_', '-');
        reason := CASE
            WHEN fk IN ('content-type', 'content-length', 'host', 'user-agent') THEN 'the worker sets it'
            WHEN left(fk, 10) = 'x-fluxora-' THEN 'x-fluxora-* headers are the worker''s'
            WHEN left(fk, 8) = 'webhook-' THEN 'webhook-* headers are the worker''s'
            WHEN fk IN ('connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization',
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
