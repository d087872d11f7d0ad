-- name: by_index
-- The first statement of a claim's and of a record's round trip: for the
-- rest of their transaction the planner takes an index wherever one
-- serves, and compiles nothing. Their statements find rows by id or
-- through a queue's index, which an index always serves best; but a plan
-- cached while the pending partition was nearly empty (statistics of a
-- quiet moment, before a burst) read the whole partition for each
-- statement as it filled, until the next ANALYZE replanned it. A plan
-- that would scan sequentially is costed far above jit_above_cost, so JIT
-- goes off with it (through PgBouncer the worker's sessions keep the
-- server's JIT setting).
SELECT set_config('enable_seqscan', 'off', true) AS by_index,
  set_config('jit', 'off', true) AS jit;
