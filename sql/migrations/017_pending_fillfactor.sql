-- 017: pending rows keep room on their page for a second version of every
-- row, so that a claim's lease stays on the page (a HOT update).
--
-- A claim leases a run of neighbouring rows: the oldest due rows of a
-- queue, written one after the other, sit on the same few pages. Each
-- lease writes a new version of its row. With fillfactor 70 (003, 013) a
-- page kept room for about two in five of its rows' new versions, so that
-- in a drain of one endpoint's queue most leases were not HOT. Those
-- went to another page and added an entry to the primary key and to
-- webhook_outbox_queue_idx, and those entries, written at the head of the
-- queue, kept the index's head pages changing, so that the dead entries
-- of delivered rows there could not be marked dead: every claim walked
-- them again, three times (the queue list, the due head, the rows taken).
-- With 45, every lease of such a drain is HOT, and the claim reads and
-- writes (WAL) a fraction of what it did. The WEBHOOK_URL endpoint's lease
-- (it sets fanout, which its indexes name) cannot be HOT, but its new
-- version now stays on its page too.
--
-- The cost is space: the pending partition holds about two thirds of the
-- rows a page it held, for rows that are there only until delivered.
-- Catalog only: pages written from now on are filled to 45%, those
-- already written keep what they hold.
SET LOCAL lock_timeout = '200ms'; -- see 003: never queue producers behind a long transaction

ALTER TABLE webhook_outbox_pending SET (fillfactor = 45);
