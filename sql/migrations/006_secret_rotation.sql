-- 006: secret rotation. `worker endpoints rotate-secret` moves the secret to
-- secret_previous and sets secret_previous_until (now() + the grace); the
-- claim hands a worker the previous secret only while the database clock is
-- before secret_previous_until, so that restarts neither extend nor shorten
-- the grace period. During it, webhook-signature carries a signature with
-- each secret, the new one first.
SET LOCAL lock_timeout = '200ms'; -- see 003: never queue behind a long transaction

-- Catalog-only: nullable columns without a default.
ALTER TABLE webhook_endpoints
    ADD COLUMN IF NOT EXISTS secret_previous       text,
    ADD COLUMN IF NOT EXISTS secret_previous_until timestamptz;

DO $$
BEGIN
    ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_secret_previous_valid
        CHECK ((secret_previous IS NULL) = (secret_previous_until IS NULL) AND secret_previous <> '');
EXCEPTION WHEN duplicate_object THEN NULL;
END;
$$;
