-- 011: endpoint hosts read as browsers read them (package hostaddr, tested
-- side by side with webhook_host_parse on one table of cases). An IPv4
-- address in any spelling ("127.000.000.001", "0x7f.1", "2130706433",
-- "127.1") is the address it means, and http is allowed only when that
-- address is a loopback one; a host whose last label is a number but that
-- is no IPv4 address ("example.123", "1.2.3.256") is refused, as is an
-- empty label or a percent sign in a host. Before, such spellings passed as
-- names here and were refused by the dialer, or sent to DNS.
--
-- Only functions change: the CHECK of webhook_endpoints.url calls
-- webhook_url_problem, so rows written from now on follow the new rules and
-- existing rows are not re-checked (a URL they would now refuse keeps
-- working until it is next updated; the worker's dialer reads it the same
-- way as this function does).

-- webhook_host_parse reads host (without its port; an IPv6 address in
-- brackets): addr is the address of an IP host in any spelling, NULL for a
-- name; problem says why host is no host at all (the texts of hostaddr).
CREATE OR REPLACE FUNCTION webhook_host_parse(p_host text, OUT addr inet, OUT problem text)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    h      text;
    parts  text[];
    n      integer;
    p      text;
    base   integer;
    digits text;
    d      integer;
    v      numeric;
    total  numeric := 0;
BEGIN
    IF left(p_host, 1) = '[' OR position(':' IN p_host) > 0 THEN
        h := p_host;
        IF left(h, 1) = '[' AND right(h, 1) = ']' THEN
            h := substr(h, 2, length(h) - 2);
        END IF;
        IF h !~ '^[0-9A-Fa-f:.]+$' OR position(':' IN h) = 0 THEN
            problem := 'is not a valid host: not an IPv6 address';
            RETURN;
        END IF;
        BEGIN
            addr := h::inet;
        EXCEPTION WHEN invalid_text_representation THEN
            addr := NULL;
        END;
        IF addr IS NULL OR family(addr) <> 6 THEN
            addr := NULL;
            problem := 'is not a valid host: not an IPv6 address';
        END IF;
        RETURN;
    END IF;
    h := lower(p_host);
    IF left(h, 1) = '.' OR position('..' IN h) > 0 THEN
        problem := 'is not a valid host: it has an empty label';
        RETURN;
    END IF;
    parts := string_to_array(h, '.');
    n := cardinality(parts);
    IF n > 1 AND parts[n] = '' THEN
        n := n - 1;
        parts := parts[1:n];
    END IF;
    -- Ends in a number: digits, or 0x and hex digits. Otherwise a name.
    IF NOT (parts[n] ~ '^[0-9]+$' OR parts[n] ~ '^0x[0-9a-f]*$') THEN
        RETURN;
    END IF;
    IF n > 4 THEN
        problem := 'is not a valid host: it ends in a number but is not an IPv4 address';
        RETURN;
    END IF;
    FOR i IN 1 .. n LOOP
        p := parts[i];
        IF left(p, 2) = '0x' THEN
            base := 16;
            digits := substr(p, 3);
        ELSIF length(p) > 1 AND left(p, 1) = '0' THEN
            base := 8;
            digits := substr(p, 2);
        ELSE
            base := 10;
            digits := p;
        END IF;
        v := 0;
        IF p = '' THEN
            v := NULL;
        END IF;
        FOR j IN 1 .. length(digits) LOOP
            d := position(substr(digits, j, 1) IN '0123456789abcdef') - 1;
            IF d < 0 OR d >= base THEN
                v := NULL;
                EXIT;
            END IF;
            v := least(v * base + d, 4294967296);
        END LOOP;
        IF v IS NULL OR (i < n AND v > 255) OR (i = n AND v >= 256 ^ (5 - n)) THEN
            problem := 'is not a valid host: it ends in a number but is not an IPv4 address';
            RETURN;
        END IF;
        total := total + CASE WHEN i < n THEN v * 256 ^ (4 - i) ELSE v END;
    END LOOP;
    addr := format('%s.%s.%s.%s', floor(total / 16777216) % 256, floor(total / 65536) % 256,
                   floor(total / 256) % 256, total % 256)::inet;
END;
$$;

-- webhook_url_problem (004) with the host read by webhook_host_parse: a
-- percent sign in a host is not a valid URL; a host that is no host says
-- why; http is allowed for localhost and for any spelling of a loopback
-- address (127.0.0.0/8, ::1, or IPv4 loopback mapped into IPv6).
CREATE OR REPLACE FUNCTION webhook_url_problem(u text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    m         text[];
    scheme    text;
    authority text;
    host      text;
    port      text;
    parsed    record;
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
    -- In brackets: an IPv6 address (else not a URL at all, as Go's
    -- url.Parse has it), and no zone (%25…), which no endpoint needs.
    IF left(authority, 1) = '[' THEN
        m := regexp_match(authority, '^\[([^\]%]*)(%25[^\]]*)?\](?::([0-9]*))?$');
        IF m IS NULL OR (webhook_host_parse('[' || m[1] || ']')).problem IS NOT NULL THEN
            RETURN 'is not a valid URL';
        END IF;
        host := '[' || m[1] || ']';
        port := m[3];
    ELSE
        m := regexp_match(authority, '^([^:\[\]%]*)(?::([0-9]*))?$');
        IF m IS NULL THEN
            RETURN 'is not a valid URL';
        END IF;
        host := m[1];
        port := m[2];
    END IF;
    IF host = '' THEN
        RETURN 'must have a host';
    END IF;
    IF port IS NOT NULL AND port <> '' AND (length(port) > 5 OR port::int < 1 OR port::int > 65535) THEN
        RETURN 'must have a port between 1 and 65535';
    END IF;
    IF m[2] IS NOT NULL AND left(authority, 1) = '[' THEN
        RETURN 'is not a valid host: not an IPv6 address';
    END IF;
    parsed := webhook_host_parse(host);
    IF parsed.problem IS NOT NULL THEN
        RETURN parsed.problem;
    END IF;
    IF scheme = 'https' THEN
        RETURN NULL;
    END IF;
    IF scheme = 'http' AND (lower(host) = 'localhost'
            OR parsed.addr << inet '127.0.0.0/8' OR parsed.addr = inet '::1'
            OR parsed.addr << inet '::ffff:127.0.0.0/104') THEN
        RETURN NULL;
    END IF;
    RETURN 'must be https (http only for a loopback host)';
END;
$$;
