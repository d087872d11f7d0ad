-- 019: a host not in ASCII is read as the worker's HTTP client will use
-- it. Go's client maps such a host with IDNA (UTS #46, the Lookup profile)
-- before it dials it or names it to a proxy in CONNECT, so "10.0.0.①",
-- "１０．０．０．１" and "10。0。0。1" are 10.0.0.1 on the wire; here they
-- were names. package hostaddr now maps first (hostaddr.Canonical), and so
-- does webhook_host_parse, tested side by side on one table of cases.
--
-- PostgreSQL has no UTS #46. Its mapping is, within what can end a host in
-- a number, NFKC with ASCII lower case, plus the ideographic full stops as dots
-- and a short list of characters IDNA drops; a character whose mapping
-- holds ASCII punctuation ("⒈" is "1.", "：" is ":") is refused, as IDNA
-- refuses it. A test runs every code point through both and requires the
-- same answer wherever IDNA maps a character to ASCII. What this cannot
-- check (the bidirectional and joiner rules, punycode labels) it lets
-- through as a name: the worker refuses such a host when it reads it, and
-- no host is ever a name here and an address to the worker.
--
-- Only functions change, as in 011: the CHECK of webhook_endpoints.url
-- calls webhook_url_problem, so rows written from now on follow the new
-- rules and existing rows are not re-checked. A stored URL whose host maps
-- to an address is read as that address by the worker whatever this says,
-- and refused by the egress guard when the guard refuses the address.

-- webhook_host_map is host as the HTTP client will use it: an ASCII host
-- as written, any other mapped as described above; problem is hostaddr's
-- ErrIDNA text when it cannot be mapped.
CREATE FUNCTION webhook_host_map(p_host text, OUT host text, OUT problem text)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    c     text;
    m     text;
    label text;
    bad   CONSTANT text := 'is not a valid host: not a valid internationalized name';
BEGIN
    IF p_host !~ '[^\x01-\x7f]' THEN
        host := p_host;
        RETURN;
    END IF;
    -- normalize() needs a UTF8 database; elsewhere no such host is read.
    IF current_setting('server_encoding') <> 'UTF8' THEN
        problem := bad;
        RETURN;
    END IF;
    host := '';
    FOREACH c IN ARRAY regexp_split_to_array(p_host, '') LOOP
        IF c IN ('.', U&'\3002', U&'\FF0E', U&'\FF61') THEN
            m := '.';
        ELSIF c = U&'\1E9E' THEN
            m := 'ss'; -- capital sharp s: IDNA folds it, lower() does not
        ELSIF c ~ U&'[\00AD\034F\180B-\180D\180F\200B\2060\2064\FE00-\FE0F\FEFF\+01BCA0-\+01BCA3\+0E0100-\+0E01EF]' THEN
            m := ''; -- dropped by IDNA
        ELSE
            -- ASCII letters alone lowered: lower() follows the locale,
            -- which can fold a character ("İ") where IDNA does not.
            m := translate(normalize(c, NFKC), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz');
            IF regexp_replace(m, '[^\x01-\x7f]', '', 'g') ~ '[^a-z0-9-]' THEN
                problem := bad;
                host := NULL;
                RETURN;
            END IF;
        END IF;
        host := host || m;
    END LOOP;
    host := normalize(host, NFKC);
    IF host = '' THEN
        problem := bad;
        host := NULL;
        RETURN;
    END IF;
    -- IDNA's hyphen rules, which it applies only to a host not in ASCII.
    FOREACH label IN ARRAY string_to_array(host, '.') LOOP
        IF label ~ '^-|-$' OR (label ~ '^..--' AND label !~ '^xn--') THEN
            problem := bad;
            host := NULL;
            RETURN;
        END IF;
    END LOOP;
END;
$$;

-- 011's webhook_host_parse reads an ASCII host; the new one maps first.
ALTER FUNCTION webhook_host_parse(text) RENAME TO webhook_ascii_host_parse;

-- webhook_host_parse reads host (without its port; an IPv6 address in
-- brackets) as hostaddr.Canonical does: name is the host the client will
-- use, addr the address of an IP host in any spelling (NULL for a name),
-- problem why host is no host at all (the texts of hostaddr).
CREATE FUNCTION webhook_host_parse(p_host text, OUT addr inet, OUT problem text, OUT name text)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    mapped record;
    parsed record;
BEGIN
    IF left(p_host, 1) = '[' OR position(':' IN p_host) > 0 THEN
        parsed := webhook_ascii_host_parse(p_host);
        addr := parsed.addr;
        problem := parsed.problem;
        name := CASE WHEN addr IS NOT NULL THEN host(addr) END;
        RETURN;
    END IF;
    mapped := webhook_host_map(p_host);
    IF mapped.problem IS NOT NULL THEN
        problem := mapped.problem;
        RETURN;
    END IF;
    parsed := webhook_ascii_host_parse(mapped.host);
    addr := parsed.addr;
    problem := parsed.problem;
    IF problem IS NULL THEN
        name := coalesce(host(addr), mapped.host);
    END IF;
END;
$$;

-- webhook_url_problem (011) with localhost judged on the mapped host, as
-- sender.ValidateURL judges it.
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
    IF scheme = 'http' AND (lower(parsed.name) = 'localhost'
            OR parsed.addr << inet '127.0.0.0/8' OR parsed.addr = inet '::1'
            OR parsed.addr << inet '::ffff:127.0.0.0/104') THEN
        RETURN NULL;
    END IF;
    RETURN 'must be https (http only for a loopback host)';
END;
$$;
