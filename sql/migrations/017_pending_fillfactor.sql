-- 017: pending rows keep room on their page for a second version of every
-- row, so that a claim's lease stays on the page (a HOT update).
--
-- A claim leases a run of neighbouring rows: the oldest due rows of a
-- queue, written one after the other, sit on the same few pages. Each
-- lease writes a new version of its row. With fillfactor 70 (003, 013) a
-- page kept room for about two in five of its rows' new versions: in a
-- drain of one endpoint's queue 46% of the leases were HOT. The others
-- went to another page and added an entry to the primary key and to
-- webhook_outbox_queue_idx, and those entries, written at the head of the
-- queue, kept the index's head pages changing, so that the dead entries
-- of delivered rows there could not be marked dead: every claim walked
-- them again, three times (the queue list, the due head, the rows taken).
-- With 45, every lease of that drain was HOT (20,350 of 20,350), the
-- claim read 220,000 buffers for 20,000 rows instead of 800,000 and wrote
-- 3.4 MB of WAL instead of 7.7, and the database's CPU fell from 0.052 to
-- 0.043 s per 1,000 deliveries. The WEBHOOK_URL endpoint's lease (it sets
-- fanout, which its indexes name) cannot be HOT, but its new version now
-- stays on its page too: 0.043 to 0.039 s per 1,000 there.
--
-- The cost is space: the pending partition holds about two thirds of the
-- rows a page it held, for rows that are there only until delivered.
-- Catalog only: pages written from now on are filled to 45%, those
-- already written keep what they hold.
SET LOCAL lock_timeout = '200ms'; -- see 003: never queue producers behind a long transaction

ALTER TABLE webhook_outbox_pending SET (fillfactor = 45);
