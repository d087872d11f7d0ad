-- 024: subscriptions by pattern, and the type prefix the worker keeps for
-- its own events (docs/endpoints.md, "Subscriptions").
--
-- webhook_subscribed(p_types, p_type) says whether an endpoint subscribed
-- to p_types (its event_types) takes an event of type p_type. It is the
-- one place that decides it: every statement that fans out or routes an
-- event calls it.
--
--   empty p_types         every type but the worker's own (fluxora.…)
--   "invoice.paid"        that type exactly (fluxora.… types too)
--   "invoice.*"           every type starting with "invoice." (not
--                         "invoice" itself); a pattern reaches a fluxora.…
--                         type only when it starts with "fluxora." itself:
--                         "*" and "f*" do not, "fluxora.*" does.
--
-- It is LANGUAGE sql, one SELECT without a subquery, not STRICT, so that
-- the planner inlines it into the claim, which is planned as if it were
-- written out there. It is STABLE, not IMMUTABLE: array_to_string is STABLE
-- in the catalog (it takes any array), and an IMMUTABLE function whose body
-- calls it is not inlined. The common cases are decided first (an empty
-- list, an exact type, a list without a pattern); only a list with a
-- pattern is read line by line: each pattern becomes its prefix, marked
-- with U+0001 unless it starts with "fluxora." (types hold no control
-- characters, 004), and the type, marked the same way, is tested for
-- starting with one of them. Only a function is added: workers of the
-- previous release run unchanged; this release's workers need it.
SET LOCAL lock_timeout = '200ms'; -- see 003: never queue producers behind a long transaction

CREATE OR REPLACE FUNCTION webhook_subscribed(p_types text[], p_type text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN cardinality(p_types) = 0 THEN NOT starts_with(p_type, 'fluxora.')
        WHEN p_type = ANY(p_types) THEN true
        WHEN strpos(array_to_string(p_types, E'\n') || E'\n', E'*\n') = 0 THEN false
        ELSE CASE WHEN starts_with(p_type, 'fluxora.') THEN p_type ELSE E'\x01' || p_type END ^@ ANY(string_to_array(substr(
            regexp_replace(
                regexp_replace(E'\n' || array_to_string(p_types, E'\n'), '\n[^\n]*[^*\n](?=\n|$)|\*(?=\n|$)', '', 'g'),
                '\n(?!fluxora\.)', E'\n\x01', 'g'), 2), E'\n'))
    END
$$;
