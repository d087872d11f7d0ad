-- The janitor's statements: the endpoints failing too long, and the lock
-- under which it disables one (disable.go's statement does the rest).

-- name: failing_endpoints
-- The enabled endpoints, by name, whose run of failed attempts began more
-- than :'after_us' microseconds ago by the database clock.
SELECT id::text AS id
FROM webhook_endpoints
WHERE enabled
  AND failing_since < now() - :'after_us'::bigint * interval '1 microsecond'
ORDER BY name;

-- name: lock_failing
-- Locks the endpoint :'id' and checks again under the lock that it is still
-- enabled and failing that long: a success recorded meanwhile
-- (failing_since cleared), an operator or another worker's janitor wins.
SELECT name,
  webhook_time_clamp(failing_since) AS since
FROM webhook_endpoints
WHERE id = :'id'
  AND enabled
  AND failing_since < now() - :'after_us'::bigint * interval '1 microsecond'
FOR UPDATE;
