-- 012: one queue per endpoint. The claim used to walk every
-- pending row in one global (created_at, id) order and filter out the
-- endpoints it could not take, so a down endpoint's backlog was read again
-- by every claim. Pending rows are now reached through three disjoint
-- partial indexes, and the claim reads only the queues it can take:
--
--   webhook_outbox_queue_idx   an endpoint's deliveries, by endpoint then
--                              (created_at, id): a loose index scan lists
--                              the endpoints with pending rows, and each
--                              endpoint's due head is one probe;
--   webhook_outbox_events_idx  events not fanned out yet (endpoint_id NULL,
--                              fanout NULL);
--   webhook_outbox_env_idx     the WEBHOOK_URL endpoint's deliveries
--                              (endpoint_id NULL, fanout set).
--
-- They hold pending rows only, so they stay small however much history the
-- table keeps. webhook_outbox_pending_idx (every pending row) is dropped: no
-- statement reads it any more, and every write would still pay for it.
--
-- Building an index locks the table against writes while it reads it; on a
-- large table, create the three indexes first with CREATE INDEX
-- CONCURRENTLY under these names (this migration then finds them and only
-- drops the old one).
CREATE INDEX IF NOT EXISTS webhook_outbox_queue_idx
    ON webhook_outbox (endpoint_id, created_at, id)
    WHERE NOT processed AND endpoint_id IS NOT NULL;

CREATE INDEX IF NOT EXISTS webhook_outbox_events_idx
    ON webhook_outbox (created_at, id)
    WHERE NOT processed AND endpoint_id IS NULL AND fanout IS NULL;

CREATE INDEX IF NOT EXISTS webhook_outbox_env_idx
    ON webhook_outbox (created_at, id)
    WHERE NOT processed AND endpoint_id IS NULL AND fanout IS NOT NULL;

DROP INDEX IF EXISTS webhook_outbox_pending_idx;
