-- 021: the internal columns of a pending row (the ones the worker alone
-- writes: its lease, its fan-out's bookkeeping, its lane's flag) can hold
-- only what the worker can act on, so that no row written by SQL, however
-- odd, stays pending forever or is miscounted by `worker status`:
--
--   webhook_outbox_lease_bound   locked_until at most an hour ahead. The
--                                longest lease a worker takes is
--                                WEBHOOK_TIMEOUT_MS at its most (15 min),
--                                two gate calls and a margin; a lease past
--                                the bound would never expire.
--   webhook_outbox_fanout_count  fanout, a count of deliveries made, is not
--                                negative.
--   webhook_outbox_held_keyed    only a row with an ordering key waits
--                                (held): a row without one has no lane to
--                                be promoted in.
--   webhook_outbox_fan_state     fan_to and fan_done (migration 018) only
--                                on an event (endpoint_id NULL), fan_done
--                                only beside fan_to, and an event in
--                                flight (fanout NULL) under a lease: the
--                                lease is what ends its fan-out in flight.
--
-- Each is a CHECK on the pending partition only (history keeps what it
-- was given, and a lazy event processed keeps its fan_to without a lease)
-- that raises, when refused, with a message naming the column and the
-- rule (a plain CHECK's DETAIL would print the whole row, payload
-- included). The lease bound reads now(): a row that passed it once passes
-- it ever after, so a later VALIDATE or restore never refuses what was
-- accepted. The allowed value comes first: a worker's write never calls
-- the function.
--
-- Rows already there, under this migration's lock, before VALIDATE:
--   a lease past the bound is taken as expired (locked_until now, token
--     kept: the next claim takes the row as a reclaim);
--   a negative fanout is a broken row: dead-lettered (as a claim's
--     undecodable row: marked processed, its event, endpoint, headers and
--     key kept), with a reason naming the column;
--   held without a key is released (held false): the row has no lane;
--   fan_to or fan_done on a delivery, or fan_done without fan_to, are
--     cleared (they count nothing there); an event in flight without a
--     lease gets one already expired: the next claim writes the rows of the
--     deliveries it still owes (fan_to less fan_done), as for any event
--     whose worker stopped.
-- The constraints are added NOT VALID first, so that nothing written while
-- the repairs run escapes them; VALIDATE then scans the pending partition
-- under the lock this migration already holds.
SET LOCAL lock_timeout = '200ms'; -- see 003: never queue producers behind a long transaction

-- webhook_state_refuse raises the refusal of constraint con: msg names the
-- column and the rule. Declared boolean to end a CHECK's OR; VOLATILE, or
-- its constant arguments would let the planner call it, and raise, when
-- the constraint's expression is prepared rather than when it is reached.
CREATE OR REPLACE FUNCTION webhook_state_refuse(con text, msg text) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION '%', msg USING ERRCODE = '23514', CONSTRAINT = con;
END;
$$;

DO $$
BEGIN
    ALTER TABLE webhook_outbox_pending ADD CONSTRAINT webhook_outbox_lease_bound
        CHECK (locked_until IS NULL OR locked_until <= now() + interval '1 hour'
               OR webhook_state_refuse('webhook_outbox_lease_bound',
                  'webhook_outbox.locked_until: a lease ends at most 1 hour from now (a worker''s lease is shorter); a later one would never expire')) NOT VALID;
EXCEPTION WHEN duplicate_object THEN NULL;
END;
$$;

DO $$
BEGIN
    ALTER TABLE webhook_outbox_pending ADD CONSTRAINT webhook_outbox_fanout_count
        CHECK (fanout IS NULL OR fanout >= 0
               OR webhook_state_refuse('webhook_outbox_fanout_count',
                  'webhook_outbox.fanout: the number of deliveries made cannot be negative')) NOT VALID;
EXCEPTION WHEN duplicate_object THEN NULL;
END;
$$;

DO $$
BEGIN
    ALTER TABLE webhook_outbox_pending ADD CONSTRAINT webhook_outbox_held_keyed
        CHECK (NOT held OR ordering_key IS NOT NULL
               OR webhook_state_refuse('webhook_outbox_held_keyed',
                  'webhook_outbox.held: only a row with an ordering_key waits in a lane')) NOT VALID;
EXCEPTION WHEN duplicate_object THEN NULL;
END;
$$;

DO $$
BEGIN
    ALTER TABLE webhook_outbox_pending ADD CONSTRAINT webhook_outbox_fan_state
        CHECK ((fan_to IS NULL AND fan_done IS NULL)
               OR (endpoint_id IS NULL AND fan_to IS NOT NULL
                   AND (fanout IS NOT NULL OR (lease_token IS NOT NULL AND locked_until IS NOT NULL)))
               OR webhook_state_refuse('webhook_outbox_fan_state',
                  'webhook_outbox.fan_to: a fan-out in flight is an event''s (endpoint_id NULL), fan_done goes with fan_to, and an event in flight (fanout NULL) has a lease (lease_token, locked_until)')) NOT VALID;
EXCEPTION WHEN duplicate_object THEN NULL;
END;
$$;

-- A lease that would never expire: expired now.
UPDATE webhook_outbox SET locked_until = now()
 WHERE NOT processed AND locked_until > now() + interval '1 hour';

-- A fan-out count that cannot be true: the row is broken, dead-lettered.
WITH moved AS (
    UPDATE webhook_outbox o
       SET processed = true, processed_at = now(), locked_until = NULL, created_at = webhook_time_clamp(o.created_at)
     WHERE NOT o.processed AND o.fanout < 0
    RETURNING o.delivery_id, o.event_type, o.payload, o.headers, o.endpoint_id, o.attempt, o.fanout, o.ordering_key, o.ordering_seq
)
INSERT INTO webhook_dead_letter (delivery_id, event_type, payload, headers, endpoint_id, attempts, last_status, last_error,
                                 ordering_key, ordering_seq, order_broken)
SELECT delivery_id, event_type, payload, headers, endpoint_id, attempt - 1, NULL,
       'migration 021: broken row: webhook_outbox.fanout ' || fanout || ' is negative; replay to send it',
       ordering_key, ordering_seq, ordering_key IS NOT NULL
  FROM moved;

-- Waiting with no lane: released.
UPDATE webhook_outbox SET held = false WHERE NOT processed AND held AND ordering_key IS NULL;

-- A fan-out's bookkeeping where it means nothing: cleared.
UPDATE webhook_outbox SET fan_to = NULL, fan_done = NULL
 WHERE NOT processed AND (fan_to IS NOT NULL OR fan_done IS NOT NULL) AND (endpoint_id IS NOT NULL OR fan_to IS NULL);

-- An event in flight without a lease: its lease has ended.
UPDATE webhook_outbox SET lease_token = coalesce(lease_token, gen_random_uuid()), locked_until = coalesce(locked_until, now())
 WHERE NOT processed AND endpoint_id IS NULL AND fanout IS NULL AND fan_to IS NOT NULL
   AND (lease_token IS NULL OR locked_until IS NULL);

ALTER TABLE webhook_outbox_pending VALIDATE CONSTRAINT webhook_outbox_lease_bound;
ALTER TABLE webhook_outbox_pending VALIDATE CONSTRAINT webhook_outbox_fanout_count;
ALTER TABLE webhook_outbox_pending VALIDATE CONSTRAINT webhook_outbox_held_keyed;
ALTER TABLE webhook_outbox_pending VALIDATE CONSTRAINT webhook_outbox_fan_state;

-- The worker's mark of an endpoint whose secret it cannot open (the key
-- file it started with does not hold the secret's key): its rows are kept
-- pending, deferred, never sent unsigned; `worker status` and the console
-- show the mark. secret_unreadable says which credential and which key id
-- (never a value); secret_unreadable_at is when a worker last found it
-- so. A worker that starts clears every mark (it opened every credential
-- before it started); one that can open a secret it had marked clears
-- its mark. Catalog only: nullable columns without a default.
ALTER TABLE webhook_endpoints ADD COLUMN IF NOT EXISTS secret_unreadable text;
ALTER TABLE webhook_endpoints ADD COLUMN IF NOT EXISTS secret_unreadable_at timestamptz;
