-- 008: a record of every attempt. One row per HTTP attempt the workers
-- made, written by the statement that records the attempt's outcome (the
-- same transaction), so that "did you send it, and what did they say?" has
-- an answer for each delivery across its retries and replays. No secret,
-- no payload, no response body: the delivery, its endpoint, the attempt
-- number, when it started and how long it took, the status and the error.
-- Pruned by the retention of processed rows (WEBHOOK_RETENTION).
SET LOCAL lock_timeout = '200ms'; -- see 003: never queue behind a long transaction

CREATE TABLE IF NOT EXISTS webhook_attempts (
    id          bigserial   PRIMARY KEY,
    delivery_id uuid        NOT NULL,
    -- NULL: the WEBHOOK_URL endpoint. No foreign key: the history of an
    -- endpoint's deliveries outlives its removal.
    endpoint_id uuid,
    -- 1 for the first attempt of a delivery; a replayed dead letter
    -- starts again at 1.
    attempt     integer     NOT NULL,
    -- By the worker's clock, when the request began.
    started_at  timestamptz NOT NULL,
    -- From the start of the request to the end of the response (or of the
    -- failure), in milliseconds.
    duration_ms double precision NOT NULL,
    -- The HTTP status; NULL when no response arrived.
    status      integer,
    -- NULL when delivered; else how the worker judged the failure:
    -- 'retryable' (another attempt follows, unless it was the last) or
    -- 'permanent' (dead-lettered at once).
    error_class text,
    -- The worker's short reason ("http 503", "timeout after 10s", ...).
    error       text,
    CONSTRAINT webhook_attempts_error_class_valid CHECK (error_class IN ('retryable', 'permanent'))
);

-- `worker attempts DELIVERY_ID`.
CREATE INDEX IF NOT EXISTS webhook_attempts_delivery_id_idx ON webhook_attempts (delivery_id);
