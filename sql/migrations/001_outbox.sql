-- 001: the outbox, its dead-letter table and the claim index.
--
-- Producers enqueue with nothing more than
--   INSERT INTO webhook_outbox (event_type, payload) VALUES ($1, $2)
-- inside their own transaction. Everything else has a default.

CREATE TABLE IF NOT EXISTS webhook_outbox (
    id           bigserial   PRIMARY KEY,
    delivery_id  uuid        NOT NULL DEFAULT gen_random_uuid(),
    event_type   text        NOT NULL,
    payload      jsonb       NOT NULL,
    attempt      integer     NOT NULL DEFAULT 1,
    created_at   timestamptz NOT NULL DEFAULT now(),
    processed    boolean     NOT NULL DEFAULT false,
    processed_at timestamptz,
    -- Consumers reject bodies over 256 KiB: such an event could never be
    -- delivered, so it is refused while the producer can still react.
    CONSTRAINT webhook_outbox_payload_max_256kib
        CHECK (octet_length(payload::text) <= 262144),
    -- event_type travels in the x-fluxora-event header: it must be a short,
    -- printable value that cannot split or forge headers.
    CONSTRAINT webhook_outbox_event_type_valid
        CHECK (event_type <> '' AND octet_length(event_type) <= 255
               AND event_type !~ '[[:cntrl:]]'),
    CONSTRAINT webhook_outbox_attempt_positive CHECK (attempt >= 1)
);

-- The claim query walks this partial index in (created_at, id) order; it only
-- holds pending rows, so it stays small however many processed rows remain.
CREATE INDEX IF NOT EXISTS webhook_outbox_pending_idx
    ON webhook_outbox (created_at, id) WHERE NOT processed;

-- Retention deletes processed rows oldest first.
CREATE INDEX IF NOT EXISTS webhook_outbox_processed_at_idx
    ON webhook_outbox (processed_at) WHERE processed;

CREATE TABLE IF NOT EXISTS webhook_dead_letter (
    id          bigserial   PRIMARY KEY,
    delivery_id uuid        NOT NULL,
    event_type  text        NOT NULL,
    payload     jsonb       NOT NULL,
    attempts    integer     NOT NULL,
    last_status integer,
    last_error  text        NOT NULL,
    died_at     timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS webhook_dead_letter_died_at_idx ON webhook_dead_letter (died_at);
CREATE INDEX IF NOT EXISTS webhook_dead_letter_delivery_id_idx ON webhook_dead_letter (delivery_id);
