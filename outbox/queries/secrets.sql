-- An endpoint's signing secret: its rotation, the end of the previous
-- secret's grace, and the mark of a secret a worker cannot open.

-- name: lock_secret
-- Locks the endpoint named :'name' and reads its id and its current secret
-- as stored: under the lock, the rotation that follows replaces the secret
-- the caller compared.
SELECT id::text AS id,
  secret
FROM webhook_endpoints
WHERE name = :'name'
FOR UPDATE;

-- name: rotate_secret
-- Makes :'secret' the secret of endpoint :'id' and keeps :'previous' (the one it
-- replaces, as the caller stored it again) until :'grace_us' microseconds
-- from now by the database clock: the end is stored, so that a restart
-- neither extends nor shortens it. A grace of 0 stops the old secret at
-- once; a secret still in an earlier grace is dropped. Returns the
-- endpoint as the catalog reads it: never a secret, every time through
-- webhook_time_clamp, the grace's end only while it lasts.
UPDATE webhook_endpoints
SET secret = :'secret',
  secret_previous = CASE WHEN :'grace_us'::bigint > 0 THEN :'previous'::text END,
  secret_previous_until = CASE WHEN :'grace_us'::bigint > 0 THEN now() + :'grace_us'::bigint * interval '1 microsecond' END
WHERE id = :'id'::uuid
RETURNING id::text AS id,
  name,
  url,
  event_types,
  enabled,
  coalesce(disabled_reason, '') AS disabled_reason,
  coalesce(retry_rps, 0) AS retry_rps,
  webhook_time_clamp(created_at) AS created_at,
  webhook_time_clamp(updated_at) AS updated_at,
  webhook_time_clamp(failing_since) AS failing_since,
  coalesce(last_error, '') AS last_error,
  coalesce(last_status, 0) AS last_status,
  webhook_time_clamp(last_error_at) AS last_error_at,
  webhook_time_clamp(disabled_at) AS disabled_at,
  CASE WHEN secret_previous_until > now() THEN webhook_time_clamp(secret_previous_until) END AS previous_secret_until,
  webhook_time_clamp(client_cert_not_after) AS client_cert_not_after,
  ordering;

-- name: forget_expired_secrets
-- Erases the previous secrets whose grace has ended by the database clock.
-- They sign nothing already (the claim hands them out only before the
-- end): no secret outlives its use.
UPDATE webhook_endpoints
SET secret_previous = NULL,
  secret_previous_until = NULL
WHERE secret_previous_until <= now();

-- name: mark_secret_unreadable
-- Records that a worker cannot open endpoint :'id''s secret (migration 021):
-- :'reason' names the credential and the key id, never a value; the time is
-- the database's. `worker status` and the console read the mark.
UPDATE webhook_endpoints
SET secret_unreadable = :'reason'::text,
  secret_unreadable_at = now()
WHERE id = :'id'::uuid;

-- name: clear_secret_unreadable
-- Removes endpoint :'id''s mark, or every mark when :'id' is NULL; a row
-- without one is not written.
UPDATE webhook_endpoints
SET secret_unreadable = NULL,
  secret_unreadable_at = NULL
WHERE secret_unreadable IS NOT NULL
  AND (:'id'::uuid IS NULL OR id = :'id'::uuid);
