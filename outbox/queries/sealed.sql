-- The endpoints' stored credentials as a whole: the worker's start-up
-- check, `worker keys rotate` and `worker keys encrypt-existing`, and the
-- client certificates the workers load. Values are read and written as the
-- columns hold them (sealed, or a plaintext stored before migration 014).

-- name: credentials
-- Every endpoint's stored credentials, by name: the secret, the previous
-- secret ('' for none, whatever its grace), the client certificate's key
-- ('' for none).
SELECT id::text AS id,
  name,
  secret,
  coalesce(secret_previous, '') AS previous,
  coalesce(client_key, '') AS client_key
FROM webhook_endpoints
ORDER BY name;

-- name: lock_credentials
-- credentials, each endpoint locked for the transaction that seals them
-- again.
SELECT id::text AS id,
  name,
  secret,
  coalesce(secret_previous, '') AS previous,
  coalesce(client_key, '') AS client_key
FROM webhook_endpoints
ORDER BY name
FOR UPDATE;

-- name: reseal
-- Writes endpoint :'id''s credentials back: a previous secret or client key
-- the row does not have stays NULL.
UPDATE webhook_endpoints
SET secret = :'secret',
  secret_previous = CASE WHEN secret_previous IS NOT NULL THEN :'previous' END,
  client_key = CASE WHEN client_key IS NOT NULL THEN :'client_key' END
WHERE id = :'id'::uuid;

-- name: client_certs
-- The endpoints that have a client certificate, by name: the PEM chain,
-- the sealed key and the leaf's expiry.
SELECT id::text AS id,
  name,
  client_cert,
  client_key,
  client_cert_not_after
FROM webhook_endpoints
WHERE client_cert IS NOT NULL
ORDER BY name;
