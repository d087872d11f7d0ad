-- 018: a fan-out whose deliveries are all leased at once writes no
-- delivery row until each delivery's outcome, so that a fan-out costs
-- little per delivery. The claim leases the event row itself, sets fan_to to the
-- endpoints of its deliveries, and hands the worker each delivery with an
-- id taken from webhook_outbox_id_seq; the event's lease fences them all.
-- Each outcome writes its delivery row once, where it ends: in the
-- history when delivered, retried or dead-lettered, pending (unleased)
-- when released or deferred; and appends its endpoint to the event's
-- fan_done. When fan_done holds as many endpoints as fan_to, the event is
-- processed with fanout = cardinality(fan_to), as a fan-out that wrote
-- its rows up front.
--
-- A delivery row written up front was an insert into the pending
-- partition (heap, primary key, queue index, the foreign key's check),
-- then its move to the history: a fan-out to ten drained at 0.86-0.88 of
-- one endpoint's queue. Now it is one insert into the history.
--
-- Should the worker stop before every outcome is written, the event's
-- lease expires and the next claim writes delivery rows up front, the
-- usual way, for the endpoints of fan_to not in fan_done (those removed
-- since aside): a delivery whose outcome was written is not made twice,
-- one whose outcome was not is not lost.
--
-- `worker status` counts those deliveries in flight (fan_to less
-- fan_done, while the event's lease lasts), by endpoint too. Both columns
-- are NULL on every other row. Catalog only: adding a nullable column
-- without a default rewrites nothing.
SET LOCAL lock_timeout = '200ms'; -- see 003: never queue producers behind a long transaction

ALTER TABLE webhook_outbox ADD COLUMN IF NOT EXISTS fan_to uuid[];
ALTER TABLE webhook_outbox ADD COLUMN IF NOT EXISTS fan_done uuid[];
