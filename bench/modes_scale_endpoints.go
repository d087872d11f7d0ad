package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// The scale situations with endpoints beside the measured one: a stuck
// endpoint's backlog, an idle endpoint, a fan-out to ten, a thousand
// endpoints with one event each.
const (
	scaleHealthy = "healthy"
	scaleStuck   = "stuck"
	scaleIdleEP  = "idle"
	// scaleIdleType is the only event type the idle endpoint subscribes
	// to; nothing is ever inserted with it.
	scaleIdleType = "bench.idle-never"
	// scaleStuckSpan is how far back stuck's rows were created: due long
	// before any of healthy's.
	scaleStuckSpan = time.Hour
	// scaleLimitedRate is stuck's rate in scale-limited (burst 0).
	scaleLimitedRate = 20
)

// ScaleBacklog is scale-backlog: a healthy endpoint measured beside
// "stuck", which has -scale-backlog due rows and never answers (each
// request ends at the worker's 2 s timeout).
type ScaleBacklog struct {
	Stuck int           `json:"stuck_rows"` // stuck's pending rows inserted before the runs
	Setup time.Duration `json:"setup_ns"`   // inserting them, VACUUM (ANALYZE)
	// Latency and Drain are healthy's, as in the baseline.
	Latency ScaleLatency `json:"latency"`
	Drain   ScaleDrain   `json:"drain"`
	// StuckHung is how many of stuck's requests were left unanswered and
	// StuckPeak the most open at once, over both runs.
	StuckHung int `json:"stuck_hung"`
	StuckPeak int `json:"stuck_peak_open"`
	// StuckLeft is stuck's pending rows after the runs (its backlog stays).
	StuckLeft int64 `json:"stuck_pending_after"`
	// StuckBusiest is, in scale-limited, the most deliveries stuck
	// received in any second of either run.
	StuckBusiest int `json:"stuck_busiest_second,omitempty"`
}

// busiestOf is the most receipts of endpoint name in any second of snap.
func busiestOf(snap endpointSnapshot, name string) int {
	times := make([]time.Time, 0, len(snap.got[name]))
	for _, at := range snap.got[name] {
		times = append(times, at)
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	return busiest(times, time.Second)
}

// ScaleFanout is scale-fanout: a backlog of events, each fanned out by the
// worker to scaleFanoutWidth endpoints subscribed to every type.
type ScaleFanout struct {
	Endpoints int        `json:"endpoints"`
	Events    int        `json:"events"`
	Drain     ScaleDrain `json:"drain"` // every endpoint's deliveries
}

// ScaleMany is scale-many: one event for each of many endpoints, all
// inserted in one producer transaction; COMMIT returned to the last
// receipt. Cold is the first round after the worker starts (no connection
// to any endpoint yet), Warm the second: the target's figure.
type ScaleMany struct {
	Endpoints   int           `json:"endpoints"`
	Cold        time.Duration `json:"cold_commit_to_last_ns"`
	ColdMissing int           `json:"cold_missing"`
	Warm        time.Duration `json:"commit_to_last_ns"`
	Missing     int           `json:"missing"` // endpoints without their event 30 s after the commit
}

// backlog inserts stuck's rows, then measures healthy's sparse latency and
// the drain of its backlog, each on a fresh worker, stuck hanging; or,
// when limited (scale-limited), stuck answering at once but limited to
// scaleLimitedRate requests a second by its endpoint's rate.
func (s scaler) backlog(ctx context.Context, limited bool) (*ScaleBacklog, error) {
	out := &ScaleBacklog{Stuck: s.opt.scaleBacklog}
	hang := map[string]bool{scaleStuck: !limited}
	err := s.withEndpoints(ctx, []string{scaleHealthy, scaleStuck}, false, nil, func(cons *endpointConsumer, ids map[string]string) error {
		t0 := time.Now()
		if limited {
			if _, err := s.pool.Exec(ctx, `UPDATE webhook_endpoints SET rate_limit = $1, rate_period_s = 1, rate_burst = 0 WHERE id = $2`,
				scaleLimitedRate, ids[scaleStuck]); err != nil {
				return fmt.Errorf("set the rate: %w", err)
			}
		}
		if err := s.insertQueue(ctx, ids[scaleStuck], scaleStuckSeq, out.Stuck, scaleStuckSpan); err != nil {
			return err
		}
		if err := s.analyze(ctx, true); err != nil {
			return err
		}
		out.Setup = time.Since(t0)
		var snap endpointSnapshot
		var err error
		if out.Latency, snap, err = s.latency(ctx, cons, scaleHealthy, toEndpoint(ids[scaleHealthy]), hang); err != nil {
			return fmt.Errorf("latency: %w", err)
		}
		out.StuckHung, out.StuckPeak = snap.hung[scaleStuck], snap.peak[scaleStuck]
		out.StuckBusiest = busiestOf(snap, scaleStuck)
		if out.Drain, snap, err = s.drainEndpoint(ctx, cons, scaleHealthy, ids[scaleHealthy], hang); err != nil {
			return fmt.Errorf("drain: %w", err)
		}
		out.StuckHung, out.StuckPeak = out.StuckHung+snap.hung[scaleStuck], max(out.StuckPeak, snap.peak[scaleStuck])
		out.StuckBusiest = max(out.StuckBusiest, busiestOf(snap, scaleStuck))
		err = s.pool.QueryRow(ctx, "SELECT count(*) FROM webhook_outbox WHERE endpoint_id = $1 AND NOT processed",
			ids[scaleStuck]).Scan(&out.StuckLeft)
		return err
	})
	return out, err
}

// idle drains -backlog rows of one endpoint beside an idle one, subscribed
// to a type nothing has.
func (s scaler) idle(ctx context.Context) (*ScaleDrain, error) {
	var out ScaleDrain
	err := s.withEndpoints(ctx, []string{"one", scaleIdleEP}, false, map[string]string{scaleIdleEP: scaleIdleType},
		func(cons *endpointConsumer, ids map[string]string) error {
			var err error
			out, _, err = s.drainEndpoint(ctx, cons, "one", ids["one"], nil)
			return err
		})
	return &out, err
}

// fanout drains -backlog/scaleFanoutWidth events (endpoint_id NULL), each
// fanned out by the worker to scaleFanoutWidth endpoints: -backlog
// deliveries, as many as the baseline drain.
func (s scaler) fanout(ctx context.Context) (*ScaleFanout, error) {
	names := make([]string, scaleFanoutWidth)
	for i := range names {
		names[i] = fmt.Sprintf("fan-%02d", i)
	}
	out := &ScaleFanout{Endpoints: len(names), Events: max(1, s.opt.backlog/len(names))}
	err := s.withEndpoints(ctx, names, true, nil, func(cons *endpointConsumer, _ map[string]string) error {
		if err := s.sys.insertBacklog(ctx, out.Events); err != nil {
			return fmt.Errorf("backlog: %w", err)
		}
		var err error
		out.Drain, _, err = s.drain(ctx, cons, names, out.Events, 0, nil)
		return err
	})
	return out, err
}

// many starts the worker beside -scale-many endpoints (one loopback
// server, a path each) and inserts one event for each of them in one
// transaction, twice: cold, then warm.
func (s scaler) many(ctx context.Context) (*ScaleMany, error) {
	names := make([]string, s.opt.scaleMany)
	for i := range names {
		names[i] = fmt.Sprintf("many-%04d", i)
	}
	out := &ScaleMany{Endpoints: len(names)}
	err := s.withEndpoints(ctx, names, true, nil, func(cons *endpointConsumer, _ map[string]string) error {
		p, err := s.sys.start(ctx, scaleEnv)
		if err != nil {
			return err
		}
		defer p.Stop()
		if out.Cold, out.ColdMissing, err = s.manyRound(ctx, cons, names, -1); err != nil {
			return fmt.Errorf("cold round: %w", err)
		}
		if out.Warm, out.Missing, err = s.manyRound(ctx, cons, names, 0); err != nil {
			return fmt.Errorf("warm round: %w", err)
		}
		return p.Stop()
	})
	return out, err
}

// manyRound inserts one event with seq for every endpoint in one
// transaction and returns COMMIT returned to the last receipt, and how
// many endpoints lacked it endpointWait after the commit.
func (s scaler) manyRound(ctx context.Context, cons *endpointConsumer, names []string, seq int64) (time.Duration, int, error) {
	cons.reset(seq, nil)
	cons.count(names)
	t := time.Now()
	payload := payloadJSON(event{Seq: seq, T: t.UnixNano()})
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id)
			SELECT 'bench.event', $1::jsonb, id FROM webhook_endpoints`, payload)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("insert: %w", err)
	}
	committed := time.Now()
	if err := cons.await(ctx, 1, endpointWait); err != nil && !errors.Is(err, errMissing) {
		return 0, 0, err
	}
	snap := cons.snapshot()
	s.sc.Duplicates += snap.dups
	var last time.Time
	missing := 0
	for _, name := range names {
		at, ok := snap.got[name][seq]
		if !ok {
			missing++
		} else if at.After(last) {
			last = at
		}
	}
	if last.IsZero() {
		return 0, missing, nil
	}
	return last.Sub(committed), missing, nil
}
