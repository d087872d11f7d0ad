package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// costPollEnv keeps the worker consuming while the trigger is dropped, so
// that both halves of a producer-cost pair carry the same delivery load and
// the ratio isolates what the trigger costs producers.
var costPollEnv = []string{"WEBHOOK_POLL_INTERVAL_MS=10"}

const triggerDefSQL = `SELECT pg_get_triggerdef(t.oid) FROM pg_trigger t
WHERE t.tgname = 'webhook_outbox_notify' AND t.tgrelid = 'webhook_outbox'::regclass`

// cost measures producer commits per second with the worker running, the
// NOTIFY trigger present and dropped in alternation (on/off, then off/on, so
// a drift over time does not favour either side).
func (r *runner) cost(ctx context.Context) (*CostResult, error) {
	var def string
	if err := r.pool.QueryRow(ctx, triggerDefSQL).Scan(&def); err != nil {
		return nil, fmt.Errorf("read trigger definition: %w", err)
	}
	p, err := r.session(ctx, costPollEnv, true)
	if err != nil {
		return nil, err
	}
	defer p.Stop()
	// Whatever happens, the trigger is put back for the next mode.
	defer r.setTrigger(context.WithoutCancel(ctx), def, true) //nolint:errcheck

	res := &CostResult{Producers: r.opt.producers, RunDuration: r.opt.costDuration}
	var seq atomic.Int64
	next := func() int64 { return seq.Add(1) - 1 }
	// One discarded run first, trigger on (the normal state): the first
	// full-speed run after start-up is measurably slower on both sides
	// (pools, caches and the table's first pages growing), and would
	// otherwise always land on the first pair's "on" half.
	if _, _, err := producers(ctx, r.pool, r.sys, r.opt.producers, r.opt.costDuration, next); err != nil {
		return nil, err
	}
	for pair := range r.opt.costPairs {
		order := []bool{true, false}
		if pair%2 == 1 {
			order = []bool{false, true}
		}
		for _, on := range order {
			if err := r.setTrigger(ctx, def, on); err != nil {
				return nil, err
			}
			start := time.Now()
			commits, end, err := producers(ctx, r.pool, r.sys, r.opt.producers, r.opt.costDuration, next)
			if err != nil {
				return nil, err
			}
			rate := perSecond(len(commits), end.Sub(start))
			if on {
				res.On = append(res.On, rate)
			} else {
				res.Off = append(res.Off, rate)
			}
		}
	}
	if off := mean(res.Off); off > 0 {
		res.Ratio = mean(res.On) / off
	}
	return res, p.Stop()
}

// setTrigger creates the trigger from its saved definition, or drops it.
func (r *runner) setTrigger(ctx context.Context, def string, on bool) error {
	sql := "DROP TRIGGER IF EXISTS webhook_outbox_notify ON webhook_outbox"
	if on {
		sql = "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'webhook_outbox_notify' " +
			"AND tgrelid = 'webhook_outbox'::regclass) THEN EXECUTE $def$" + def + "$def$; END IF; END $$"
	}
	// On a partitioned outbox the trigger's DDL locks every partition,
	// and may deadlock with the worker's statements (SQLSTATE 40P01), which
	// PostgreSQL resolves by failing it: it is idempotent, so it runs again.
	var err error
	for range 10 {
		var pgErr *pgconn.PgError
		if _, err = r.pool.Exec(ctx, sql); !errors.As(err, &pgErr) || pgErr.Code != "40P01" {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("set trigger (on=%v): %w", on, err)
	}
	return nil
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// retry makes every first attempt fail with 503 and measures how late each
// second attempt arrives after the time its row (or River job) says it is
// due.
func (r *runner) retry(ctx context.Context) (*RetryResult, error) {
	p, err := r.session(ctx, r.sys.retryEnv(), true)
	if err != nil {
		return nil, err
	}
	defer p.Stop()
	r.cons.reset(0, profileFailFirst)
	n := r.opt.retryEvents
	interval := latencyInterval
	_, missing, err := r.paced(ctx, n, interval)
	if err != nil {
		return nil, err
	}
	due, err := r.sys.retryDue(ctx)
	if err != nil {
		return nil, fmt.Errorf("read due times: %w", err)
	}
	s := r.cons.snapshot()
	res := &RetryResult{Events: n, Missing: missing}
	var late []time.Duration
	for seq, at := range s.retryAt {
		d, ok := due[seq]
		if !ok {
			continue
		}
		l := at.Sub(d)
		if l < 0 {
			res.Early++
			l = 0
		}
		late = append(late, l)
	}
	res.Lateness = summarize(late)
	return res, p.Stop()
}
