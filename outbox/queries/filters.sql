-- Payload filters (migration 030): an endpoint's payload_filter, a
-- jsonpath the claim evaluates on each event of a type it subscribes to
-- (webhook_takes).

-- name: check_filter
-- :'payload_filter' as PostgreSQL reads it: its text as stored (jsonpath's
-- own spelling), and why it may not be stored (webhook_filter_problem), or
-- NULL. Text that is not jsonpath is refused by the cast, with PostgreSQL's
-- message.
SELECT p::text AS filter,
  webhook_filter_problem(p) AS problem
FROM (SELECT :'payload_filter'::jsonpath AS p) f;

-- name: endpoint_filters
-- Every endpoint's payload filter, by name (the list's, the status's, the
-- console's); endpoints without one are left out.
SELECT e.name,
  e.payload_filter::text AS filter
FROM webhook_endpoints e
WHERE e.payload_filter IS NOT NULL
ORDER BY e.name;
