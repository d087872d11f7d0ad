-- 030: payload filters per endpoint (docs/endpoints.md, "Payload filters").
--
-- An endpoint may have a payload_filter, a jsonpath: it takes an event of
-- a type it subscribes to only when the filter finds something in the
-- event's payload (jsonb_path_exists). NULL, the default: every event of
-- its types, as before.
--
-- webhook_takes(p_types, p_filter, p_type, p_payload) is who takes an
-- event: webhook_subscribed (024) first, then the filter, only for an
-- endpoint that has one (a NULL filter costs nothing more). Every
-- statement of the claim that fans out or routes an event calls it, in
-- 024's place. The filter runs silent (errors of the payload's shape: a
-- missing member in strict mode, a wrong type, a number or a date it
-- cannot read) and its NULL, what silent returns on such an error, is no
-- match: an event is never stalled, nor a claim failed, by a payload a
-- filter did not expect. It runs the _tz variant, which compares a date
-- or time without a zone to one with a zone in the session's TimeZone
-- where the other refuses to (an error silent does not suppress). Like
-- 024's, it is LANGUAGE sql, one SELECT, STABLE, not STRICT: the planner
-- inlines it into the claim. Its CASE keeps the order: the type first,
-- then whether there is a filter, and only then the payload.
--
-- webhook_filter_problem(p) is why a filter may not be stored, or NULL:
-- over 4096 bytes of text, or a variable ($name), which no statement
-- passes and whose absence is an error silent does not suppress. Variables
-- print as $"name" (jsonpath's own text); string literals are taken out
-- first, so that "$" in one is no variable. The CHECK applies it to every
-- row, however written; the worker checks a filter with it before writing
-- one, and a filter that is not jsonpath is refused by the cast, with
-- PostgreSQL's message.
--
-- Only a nullable column, a CHECK and functions are added: workers of the
-- previous release run unchanged (they ignore filters); this release's
-- workers need it.
SET LOCAL lock_timeout = '200ms'; -- see 003: never queue producers behind a long transaction

CREATE OR REPLACE FUNCTION webhook_filter_problem(p jsonpath) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN octet_length(p::text) > 4096 THEN format('%s bytes of jsonpath, over the limit of 4096', octet_length(p::text))
        WHEN strpos(regexp_replace(p::text, '"(\\.|[^"\\])*"', '""', 'g'), '$"') > 0
            THEN 'a filter reads no variables ($name): write the value itself'
    END
$$;

ALTER TABLE webhook_endpoints
    ADD COLUMN IF NOT EXISTS payload_filter jsonpath;

DO $$
BEGIN
    ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_payload_filter_valid
        CHECK (webhook_filter_problem(payload_filter) IS NULL);
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;

CREATE OR REPLACE FUNCTION webhook_takes(p_types text[], p_filter jsonpath, p_type text, p_payload jsonb) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN NOT webhook_subscribed(p_types, p_type) THEN false
        WHEN p_filter IS NULL THEN true
        ELSE coalesce(jsonb_path_exists_tz(p_payload, p_filter, '{}', true), false)
    END
$$;
