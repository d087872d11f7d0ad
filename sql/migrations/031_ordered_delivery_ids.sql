-- 031: delivery ids in the order they are written (ARCHITECTURE.md, "Where
-- rows live").
--
-- A row written without a delivery_id got gen_random_uuid(). Every
-- processed row enters the history's delivery-id index (026), and every
-- attempt the attempts' (008): with random ids each lands on a random leaf
-- of a large index, and a record of a hundred deliveries dirties a
-- hundred leaves (and writes them to the WAL after each checkpoint). The
-- default is now webhook_delivery_uuid(), a version 7 UUID (RFC 9562):
-- the Unix time in milliseconds, then 74 random bits. Rows written close in
-- time share the right end of those indexes, as they share their time
-- indexes'. An id is as unique as before (74 random bits within one
-- millisecond) and still a UUID to consumers; its first digits tell when
-- the row was written, as the row's created_at does.
--
-- The deliveries of a fan-out keep their derived ids (md5 of the event's id,
-- '/', the endpoint's id): any worker, of any version, derives the same id
-- for the same event and endpoint. Ids a producer gives are kept as given.
-- Older workers run unchanged: they never make these ids.
SET LOCAL lock_timeout = '200ms'; -- see 003: never queue producers behind a long transaction

-- webhook_delivery_uuid: a version 7 UUID of the clock's time. Built from
-- gen_random_uuid()'s text (version and variant in place), its version
-- digit replaced and its first twelve digits the time; one SQL expression,
-- which the planner inlines into an INSERT.
CREATE OR REPLACE FUNCTION webhook_delivery_uuid() RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT (lpad(to_hex(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0') || '7'
            || substr(gen_random_uuid()::text, 16))::uuid
$$;

ALTER TABLE webhook_outbox ALTER COLUMN delivery_id SET DEFAULT webhook_delivery_uuid();
