package main

import (
	"context"
	"fmt"
	"time"
)

// scale-history: processed rows the worker keeps (within WEBHOOK_RETENTION,
// 7 days) and processed rows past it, which the worker's retention deletes
// while the runs go on.
const (
	day = 24 * time.Hour
	// The kept rows were processed over the last 6 days (the newest a
	// minute ago), the expired ones 8 to 10 days ago.
	keptNewest, keptSpan       = time.Minute, 6 * day
	expiredNewest, expiredSpan = 8 * day, 2 * day
	// expiredPoll is how often the end of the mode looks for an expired row
	// left, until none is or the deadline, expiredWait plus expiredPerRow
	// a row, passes.
	expiredPoll   = time.Second
	expiredWait   = time.Minute
	expiredPerRow = 300 * time.Microsecond
)

// expiredCountSQL counts the processed rows past the 7-day retention.
const expiredCountSQL = `SELECT count(*) FROM webhook_outbox WHERE processed AND processed_at < now() - interval '7 days'`

// expiredLeftSQL says whether any is left: the poll's query. The oldest
// processed_at is one probe of the partial index on processed_at (which
// retention deletes through, oldest first), where a count, or an EXISTS
// the planner runs as a sequential scan, would read the table every
// second and slow the deletes down.
const expiredLeftSQL = `SELECT coalesce((SELECT min(processed_at) FROM webhook_outbox WHERE processed) < now() - interval '7 days', false)`

// outboxSizeSQL sums, over every partition if the outbox is partitioned
// (pg_partition_tree has no rows for a plain table, hence the fallbacks),
// the outbox with its indexes and TOAST, and its partial indexes on NOT
// processed: those holding pending rows only.
const outboxSizeSQL = `SELECT
	coalesce((SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('webhook_outbox')),
	         pg_total_relation_size('webhook_outbox'))::bigint,
	coalesce((SELECT sum(coalesce((SELECT sum(pg_relation_size(t.relid)) FROM pg_partition_tree(i.indexrelid) AS t),
	                              pg_relation_size(i.indexrelid)))
	          FROM pg_index AS i
	          WHERE i.indrelid = 'webhook_outbox'::regclass AND pg_get_expr(i.indpred, i.indrelid) LIKE '%NOT processed%'), 0)::bigint`

// ScaleHistory is scale-history: (a) Kept processed rows within retention,
// (b) on an emptied table, Expired processed rows past it, inserted again
// before each run. Each beside one endpoint's sparse latency and drain, as
// in the baseline.
type ScaleHistory struct {
	Kept        int           `json:"kept_rows"`
	KeptSetup   time.Duration `json:"kept_setup_ns"` // inserting them, VACUUM (ANALYZE)
	KeptLatency ScaleLatency  `json:"kept_latency"`
	KeptDrain   ScaleDrain    `json:"kept_drain"`
	KeptSize    OutboxSize    `json:"kept_size"` // after its runs

	Expired        int           `json:"expired_rows"`
	ExpiredSetup   time.Duration `json:"expired_setup_ns"` // the last of its two inserts
	ExpiredSize    OutboxSize    `json:"expired_size"`     // before its first run
	ExpiredDrain   ScaleDrain    `json:"expired_drain"`
	ExpiredLatency ScaleLatency  `json:"expired_latency"`
	// ExpiredLeft is how many expired rows were left when the drain (the
	// second run) ended. The mode then runs the worker until none is left
	// (Gone) or the deadline passes, Left rows then remaining; GoneAfter is
	// from the drain's worker start to the count that found none, or to
	// the deadline.
	ExpiredLeft int64         `json:"expired_left_after_runs"`
	Gone        bool          `json:"expired_gone"`
	GoneAfter   time.Duration `json:"expired_gone_after_ns"`
	Left        int64         `json:"expired_left_at_deadline"`
	AfterSize   OutboxSize    `json:"after_retention_size"`
}

// OutboxSize is the outbox's size on disk.
type OutboxSize struct {
	Total   int64 `json:"total_bytes"`         // table, indexes, TOAST; every partition
	Pending int64 `json:"pending_index_bytes"` // its partial indexes on NOT processed
}

// history runs (a) and (b) with one endpoint, "one".
func (s scaler) history(ctx context.Context) (*ScaleHistory, error) {
	out := &ScaleHistory{Kept: s.opt.scaleKept, Expired: s.opt.scaleExpired}
	err := s.withEndpoints(ctx, []string{"one"}, false, nil, func(cons *endpointConsumer, ids map[string]string) error {
		if err := s.historyKept(ctx, cons, ids["one"], out); err != nil {
			return fmt.Errorf("kept: %w", err)
		}
		if err := s.historyExpired(ctx, cons, ids["one"], out); err != nil {
			return fmt.Errorf("expired: %w", err)
		}
		return nil
	})
	return out, err
}

// historyKept is (a): the kept rows, the latency, the drain, the size.
func (s scaler) historyKept(ctx context.Context, cons *endpointConsumer, id string, out *ScaleHistory) error {
	t0 := time.Now()
	if err := s.insertHistory(ctx, out.Kept, keptNewest, keptSpan); err != nil {
		return err
	}
	out.KeptSetup = time.Since(t0)
	var err error
	if out.KeptLatency, _, err = s.latency(ctx, cons, "one", toEndpoint(id), nil); err != nil {
		return fmt.Errorf("latency: %w", err)
	}
	if out.KeptDrain, _, err = s.drainEndpoint(ctx, cons, "one", id, nil); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	out.KeptSize, err = s.outboxSize(ctx)
	return err
}

// historyExpired is (b): the expired rows inserted into an emptied table,
// the latency while retention removes them; the expired rows inserted
// again into the emptied table, the drain while retention removes them;
// then the wait until they are gone. Each run starts from an emptied
// outbox, as the baseline's runs do, so that only the expired rows tell
// them apart: a latency run right after the drain would also run over the
// rows the drain had just moved out of the pending partition, not yet
// vacuumed, which no baseline latency run sees.
func (s scaler) historyExpired(ctx context.Context, cons *endpointConsumer, id string, out *ScaleHistory) error {
	if err := s.insertExpired(ctx, out); err != nil {
		return err
	}
	var err error
	if out.ExpiredSize, err = s.outboxSize(ctx); err != nil {
		return err
	}
	if out.ExpiredLatency, _, err = s.latency(ctx, cons, "one", toEndpoint(id), nil); err != nil {
		return fmt.Errorf("latency: %w", err)
	}
	if err := s.insertExpired(ctx, out); err != nil {
		return err
	}
	first := time.Now()
	if out.ExpiredDrain, _, err = s.drainEndpoint(ctx, cons, "one", id, nil); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	if err := s.pool.QueryRow(ctx, expiredCountSQL).Scan(&out.ExpiredLeft); err != nil {
		return fmt.Errorf("count expired: %w", err)
	}
	if err := s.awaitExpiredGone(ctx, first, out); err != nil {
		return err
	}
	out.AfterSize, err = s.outboxSize(ctx)
	return err
}

// insertExpired empties the outbox and inserts the expired rows; the
// setup's time is the last such insert's.
func (s scaler) insertExpired(ctx context.Context, out *ScaleHistory) error {
	if err := s.sys.reset(ctx); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	t0 := time.Now()
	if err := s.insertHistory(ctx, out.Expired, expiredNewest, expiredSpan); err != nil {
		return err
	}
	out.ExpiredSetup = time.Since(t0)
	return nil
}

// awaitExpiredGone runs the worker until no expired row is left, looking
// every expiredPoll, or until a deadline proportional to the rows, when it
// counts those left.
func (s scaler) awaitExpiredGone(ctx context.Context, first time.Time, out *ScaleHistory) error {
	out.Left = out.ExpiredLeft
	if out.Left == 0 {
		out.Gone, out.GoneAfter = true, time.Since(first)
		return nil
	}
	p, err := s.sys.start(ctx, scaleEnv)
	if err != nil {
		return err
	}
	defer p.Stop()
	deadline := time.NewTimer(expiredWait + time.Duration(out.Expired)*expiredPerRow)
	defer deadline.Stop()
	tick := time.NewTicker(expiredPoll)
	defer tick.Stop()
	for left := true; left; {
		select {
		case <-tick.C:
		case <-deadline.C:
			out.GoneAfter = time.Since(first)
			if err := s.pool.QueryRow(ctx, expiredCountSQL).Scan(&out.Left); err != nil {
				return fmt.Errorf("count expired: %w", err)
			}
			return p.Stop()
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := s.pool.QueryRow(ctx, expiredLeftSQL).Scan(&left); err != nil {
			return fmt.Errorf("look for expired rows: %w", err)
		}
	}
	out.Gone, out.GoneAfter, out.Left = true, time.Since(first), 0
	return p.Stop()
}

// insertHistory inserts n processed rows, as years of traffic leave them,
// in statements of at most insertChunk rows: processed_at spread evenly
// from span+newest to newest ago, each created 100 ms before, into the
// daily partitions the worker would have made over that time, where the
// schema has them. Then VACUUM (ANALYZE), as a real table would have been,
// and CHECKPOINT, as a real table's history is long written out.
func (s scaler) insertHistory(ctx context.Context, n int, newest, span time.Duration) error {
	t := time.Now().UnixNano()
	// The daily partitions a worker running through those days would have
	// made (a schema with history partitions only: migration 013).
	if _, err := s.pool.Exec(ctx, `SELECT webhook_history_prepare(p, interval '1 day', now() - make_interval(secs => $1::float8), now())
		FROM unnest(ARRAY['webhook_outbox_history', 'webhook_attempts']) AS p
		WHERE to_regproc('webhook_history_prepare') IS NOT NULL`, (newest + span).Seconds()); err != nil {
		return fmt.Errorf("history partitions: %w", err)
	}
	for from := 0; from < n; from += insertChunk {
		to := min(n, from+insertChunk)
		if _, err := s.pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload, created_at, processed, processed_at)
			SELECT 'bench.event', jsonb_build_object('seq', g, 't', $1::bigint), at - interval '100 milliseconds', true, at
			FROM (SELECT g, now() - make_interval(secs => $2::float8 + $3::float8 * (1 - g::float8 / $4::float8)) AS at
			      FROM generate_series($5::bigint, $6::bigint - 1) AS g) AS h`,
			t, newest.Seconds(), span.Seconds(), float64(n), from, to); err != nil {
			return fmt.Errorf("insert history: %w", err)
		}
	}
	if err := s.analyze(ctx, true); err != nil {
		return err
	}
	// History written long ago is on disk: without a checkpoint the runs
	// would share the machine with writing out the rows just inserted
	// (hundreds of MiB), which no real table's history costs.
	if _, err := s.pool.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// outboxSize measures the outbox's size on disk (outboxSizeSQL).
func (s scaler) outboxSize(ctx context.Context) (OutboxSize, error) {
	var o OutboxSize
	if err := s.pool.QueryRow(ctx, outboxSizeSQL).Scan(&o.Total, &o.Pending); err != nil {
		return o, fmt.Errorf("outbox size: %w", err)
	}
	return o, nil
}
