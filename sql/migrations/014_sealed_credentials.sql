-- 014: credentials sealed at rest, and client certificates. The signing
-- secrets (secret, secret_previous) keep their columns: the worker writes
-- them sealed (package sealed: "fxsealed:v1:<key id>:<base64>", AEAD under a
-- key of WEBHOOK_SECRETS_KEY_FILE, the endpoint's id bound as associated
-- data), and still reads a plaintext stored before this migration until
-- `worker keys encrypt-existing` seals it. The claim hands a worker the
-- column as it is; the worker opens it.
--
-- client_cert is the PEM certificate chain an endpoint presents for mutual
-- TLS (public); client_key its private key, always sealed (there is no
-- plaintext of it to carry over); client_cert_not_after the leaf's expiry,
-- for `worker status` and the days-left metric without parsing PEM in SQL.
SET LOCAL lock_timeout = '200ms'; -- see 003: never queue behind a long transaction

-- Catalog-only: nullable columns without a default.
ALTER TABLE webhook_endpoints
    ADD COLUMN IF NOT EXISTS client_cert           text,
    ADD COLUMN IF NOT EXISTS client_key            text,
    ADD COLUMN IF NOT EXISTS client_cert_not_after timestamptz;

-- NOT VALID then VALIDATE: no row has these columns yet, but VALIDATE takes
-- only a SHARE UPDATE EXCLUSIVE lock, which producers never wait on.
DO $$
BEGIN
    ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_client_cert_valid
        CHECK ((client_cert IS NULL) = (client_key IS NULL) AND (client_cert IS NULL) = (client_cert_not_after IS NULL)
               AND client_key LIKE 'fxsealed:%') NOT VALID;
EXCEPTION WHEN duplicate_object THEN NULL;
END;
$$;
ALTER TABLE webhook_endpoints VALIDATE CONSTRAINT webhook_endpoints_client_cert_valid;
