package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The scale modes (worker only: River has no endpoints). Each
// measures one situation beside the scale baseline, one endpoint on an
// empty table, run once per worker system and invocation before the first
// scale mode and again after each situation that has a ratio target:
// every such situation is compared with the mean of the baseline runs
// just before and just after it (A, B, A), so that the machine's drift
// over the minutes between two runs weighs on both sides alike.
const (
	modeScaleBacklog = "scale-backlog"
	modeScaleLimited = "scale-limited"
	modeScaleIdle    = "scale-idle"
	modeScaleFanout  = "scale-fanout"
	modeScaleMany    = "scale-many"
	modeScaleHistory = "scale-history"
)

// scaleModes run only when -modes names them (or "scale", all of them):
// with their millions of rows they take several minutes per system.
var scaleModes = []string{modeScaleBacklog, modeScaleLimited, modeScaleIdle, modeScaleFanout, modeScaleMany, modeScaleHistory}

// scaleAlias stands for every scale mode in -modes.
const scaleAlias = "scale"

const (
	scaleTimeout     = 2 * time.Second // WEBHOOK_TIMEOUT_MS of every scale run: stuck's requests end there
	scaleFanoutWidth = 10              // endpoints of scale-fanout, each subscribed to every event
	// scaleDrainSeq is the first seq of a drain's rows, so that a late
	// event of the latency run before it is never counted as drained.
	scaleDrainSeq = int64(1) << 40
	// scaleStuckSeq is the first seq of stuck's rows (never recorded).
	scaleStuckSeq = int64(1) << 50
	// insertChunk is the most rows one bulk INSERT … SELECT writes.
	insertChunk = 250_000
)

// scaleEnv is the worker's environment in every scale run, the baseline's
// too, so that the ratios isolate the situation: no WEBHOOK_URL endpoint
// (endpointEnv), a 2 s request timeout, the default retention of 7 days
// said explicitly.
var scaleEnv = append(append([]string(nil), endpointEnv...),
	fmt.Sprintf("WEBHOOK_TIMEOUT_MS=%d", scaleTimeout.Milliseconds()), "WEBHOOK_RETENTION=7d")

// ScaleResult is one worker system's scale figures: the baseline and the
// situations that ran.
type ScaleResult struct {
	// Baseline is the first baseline run; Baselines every one, in order.
	Baseline  *ScaleBaseline  `json:"baseline,omitempty"`
	Baselines []ScaleBaseline `json:"baselines,omitempty"`
	// Around is, by situation (its mode), what its ratios are against:
	// the mean of the baseline runs just before and just after it, or
	// for order-blocked the baseline run just before it.
	Around  map[string]*ScaleBaseline `json:"around,omitempty"`
	Backlog *ScaleBacklog             `json:"backlog,omitempty"`
	Limited *ScaleBacklog             `json:"limited,omitempty"` // scale-limited: stuck answers but is rate-limited
	Idle    *ScaleDrain               `json:"idle,omitempty"`    // one endpoint's drain beside an idle one
	Fanout  *ScaleFanout              `json:"fanout,omitempty"`
	Many    *ScaleMany                `json:"many,omitempty"`
	History *ScaleHistory             `json:"history,omitempty"`
	// The ordering modes.
	OrderKeys    *OrderKeys    `json:"order_keys,omitempty"`
	OrderHot     *OrderHot     `json:"order_hot,omitempty"`
	OrderBlocked *OrderBlocked `json:"order_blocked,omitempty"`
	// Over every scale run: deliveries of an already delivered (endpoint,
	// event), bad signatures, requests naming another endpoint.
	Duplicates    int   `json:"duplicates"`
	BadSignatures int64 `json:"bad_signatures"`
	Misrouted     int64 `json:"misrouted"`
}

// ScaleBaseline is one endpoint on an empty table: what every scale ratio
// is against.
type ScaleBaseline struct {
	Latency ScaleLatency `json:"latency"`
	Drain   ScaleDrain   `json:"drain"`
}

// ScaleLatency is a sparse-latency run: one event every latencyInterval to
// one endpoint, after a warm-up.
type ScaleLatency struct {
	Events  int         `json:"events"`
	Latency Percentiles `json:"latency"`      // insert start to receipt
	After   Percentiles `json:"after_commit"` // COMMIT returned to receipt
	Missing int         `json:"missing"`
}

// ScaleDrain is a backlog drain: rows inserted before the worker starts,
// process start to the last receipt.
type ScaleDrain struct {
	Deliveries int           `json:"deliveries"` // received
	Elapsed    time.Duration `json:"elapsed_ns"`
	PerSecond  float64       `json:"deliveries_per_second"`
	Missing    int           `json:"missing"`
}

// scaler runs the scale modes of one system, tallying into sc.
type scaler struct {
	*runner
	sc *ScaleResult
}

// scale runs one scale mode, after the baseline when this system has none
// yet.
func (r *runner) scale(ctx context.Context, mode string, res *SystemResult) error {
	if res.Scale == nil {
		res.Scale = &ScaleResult{}
	}
	s := scaler{runner: r, sc: res.Scale}
	if s.sc.Baseline == nil {
		b, err := s.baseline(ctx)
		if err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
		s.sc.Baseline, s.sc.Baselines = b, []ScaleBaseline{*b}
	}
	if err := s.situation(ctx, mode); err != nil {
		return err
	}
	if !bracketed[mode] {
		return nil
	}
	before := s.sc.Baselines[len(s.sc.Baselines)-1]
	after, err := s.baseline(ctx)
	if err != nil {
		return fmt.Errorf("baseline after %s: %w", mode, err)
	}
	s.sc.Baselines = append(s.sc.Baselines, *after)
	if s.sc.Around == nil {
		s.sc.Around = map[string]*ScaleBaseline{}
	}
	s.sc.Around[mode] = meanBaseline(before, *after)
	return nil
}

// bracketed are the situations compared with the baseline runs around
// them (the others have absolute targets, or compare runs of their own).
var bracketed = map[string]bool{modeScaleBacklog: true, modeScaleLimited: true, modeScaleIdle: true, modeScaleFanout: true, modeScaleHistory: true}

// base is what situation mode's ratios are against: the mean of the
// baseline runs around it, else the first baseline.
func (sc *ScaleResult) base(mode string) *ScaleBaseline {
	if b := sc.Around[mode]; b != nil {
		return b
	}
	return sc.Baseline
}

// meanBaseline averages two baseline runs: their latency percentiles and
// drain rates; missing counts add up.
func meanBaseline(a, b ScaleBaseline) *ScaleBaseline {
	mean := func(x, y time.Duration) time.Duration { return (x + y) / 2 }
	pct := func(x, y Percentiles) Percentiles {
		return Percentiles{N: x.N + y.N, P50: mean(x.P50, y.P50), P90: mean(x.P90, y.P90), P99: mean(x.P99, y.P99), Max: max(x.Max, y.Max)}
	}
	return &ScaleBaseline{
		Latency: ScaleLatency{Events: a.Latency.Events + b.Latency.Events, Latency: pct(a.Latency.Latency, b.Latency.Latency),
			After: pct(a.Latency.After, b.Latency.After), Missing: a.Latency.Missing + b.Latency.Missing},
		Drain: ScaleDrain{Deliveries: a.Drain.Deliveries + b.Drain.Deliveries, Elapsed: mean(a.Drain.Elapsed, b.Drain.Elapsed),
			PerSecond: (a.Drain.PerSecond + b.Drain.PerSecond) / 2, Missing: a.Drain.Missing + b.Drain.Missing},
	}
}

// situation runs scale mode mode.
func (s scaler) situation(ctx context.Context, mode string) error {
	var err error
	switch mode {
	case modeScaleBacklog:
		s.sc.Backlog, err = s.backlog(ctx, false)
	case modeScaleLimited:
		s.sc.Limited, err = s.backlog(ctx, true)
	case modeScaleIdle:
		s.sc.Idle, err = s.idle(ctx)
	case modeScaleFanout:
		s.sc.Fanout, err = s.fanout(ctx)
	case modeScaleMany:
		s.sc.Many, err = s.many(ctx)
	case modeScaleHistory:
		s.sc.History, err = s.history(ctx)
	case modeOrderKeys, modeOrderHot, modeOrderBlocked:
		err = s.ordered(ctx, mode)
	default:
		err = fmt.Errorf("unknown scale mode %q", mode)
	}
	return err
}

// baseline measures one endpoint on an empty table: the sparse latency,
// then, on the emptied table, the drain of -backlog rows.
func (s scaler) baseline(ctx context.Context) (*ScaleBaseline, error) {
	out := &ScaleBaseline{}
	err := s.withEndpoints(ctx, []string{"one"}, false, nil, func(cons *endpointConsumer, ids map[string]string) error {
		var err error
		if out.Latency, _, err = s.latency(ctx, cons, "one", toEndpoint(ids["one"]), nil); err != nil {
			return err
		}
		if err := s.sys.reset(ctx); err != nil {
			return fmt.Errorf("reset: %w", err)
		}
		out.Drain, _, err = s.drainEndpoint(ctx, cons, "one", ids["one"], nil)
		return err
	})
	return out, err
}

// withEndpoints empties the outbox, starts one loopback endpoint per name
// (shared: one server, a path each), inserts them into webhook_endpoints as
// an operator does, subscribed to types[name] ("" or absent: every type),
// and runs f with their ids by name. Afterwards the endpoints are removed,
// the outbox is emptied, every request still hanging is released and the
// consumer's bad signatures and misrouted requests are tallied.
func (s scaler) withEndpoints(ctx context.Context, names []string, shared bool, types map[string]string,
	f func(*endpointConsumer, map[string]string) error) error {
	s.cons.reset(0, profileInstant) // as in noisy: the single consumer gets nothing here
	cons, err := newEndpointConsumer(names, shared)
	if err != nil {
		return err
	}
	defer cons.Close()
	defer s.clearEndpoints(context.WithoutCancel(ctx)) //nolint:errcheck // the next mode's reset empties the outbox anyway
	ids, err := s.addEndpoints(ctx, cons.endpoints, types)
	if err != nil {
		return err
	}
	err = f(cons, ids)
	s.sc.BadSignatures += cons.badSignatures.Load()
	s.sc.Misrouted += cons.misrouted.Load()
	return err
}

// addEndpoints replaces the endpoints of webhook_endpoints with eps and
// returns their ids by name.
func (s scaler) addEndpoints(ctx context.Context, eps []*endpoint, types map[string]string) (map[string]string, error) {
	if err := s.clearEndpoints(ctx); err != nil {
		return nil, err
	}
	var names, urls, secrets, subs []string
	for _, ep := range eps {
		names, urls = append(names, ep.name), append(urls, ep.url)
		secrets, subs = append(secrets, string(ep.secret)), append(subs, types[ep.name])
	}
	rows, err := s.pool.Query(ctx, `INSERT INTO webhook_endpoints (name, url, secret, event_types)
		SELECT name, url, secret, CASE WHEN sub = '' THEN '{}'::text[] ELSE ARRAY[sub] END
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS e(name, url, secret, sub)
		RETURNING name, id::text`, names, urls, secrets, subs)
	if err != nil {
		return nil, fmt.Errorf("insert endpoints: %w", err)
	}
	ids := map[string]string{}
	var name, id string
	if _, err := pgx.ForEachRow(rows, []any{&name, &id}, func() error { ids[name] = id; return nil }); err != nil {
		return nil, fmt.Errorf("insert endpoints: %w", err)
	}
	return ids, nil
}

// toEndpoint inserts an event for endpoint id only (endpoint_id set), as a
// producer does with webhook_enqueue(type, payload, endpoint) or
// producer.ToEndpoint.
func toEndpoint(id string) inserter {
	return func(ctx context.Context, tx pgx.Tx, ev event) error {
		_, err := tx.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id) VALUES ($1, $2, $3)`,
			"bench.event", payloadJSON(ev), id)
		return err
	}
}

// latency starts the worker, warms it up with events to endpoint name for
// warmDuration (all received) and inserts -events events with insert, one
// every latencyInterval, measured at name. The endpoints in hang never
// answer. Warm-up and measurement are one consumer run, so a hung request
// is not released between them. It returns the run's record too.
func (s scaler) latency(ctx context.Context, cons *endpointConsumer, name string, insert inserter, hang map[string]bool) (ScaleLatency, endpointSnapshot, error) {
	cons.reset(-scaleDrainSeq, hang)
	cons.count([]string{name})
	p, err := s.sys.start(ctx, scaleEnv)
	if err != nil {
		return ScaleLatency{}, endpointSnapshot{}, err
	}
	defer p.Stop()
	warm := max(1, int(warmDuration/latencyInterval))
	if _, err = s.paceWith(ctx, warm, latencyInterval, -int64(warm), insert); err == nil {
		err = cons.await(ctx, warm, readyTimeout)
	}
	if err != nil {
		return ScaleLatency{}, endpointSnapshot{}, fmt.Errorf("warm-up: %w", err)
	}
	n := s.opt.events
	commits, err := s.paceWith(ctx, n, latencyInterval, 0, insert)
	if err != nil {
		return ScaleLatency{}, endpointSnapshot{}, err
	}
	if err := cons.await(ctx, warm+n, endpointWait); err != nil && !errors.Is(err, errMissing) {
		return ScaleLatency{}, endpointSnapshot{}, err
	}
	snap := cons.snapshot()
	s.sc.Duplicates += snap.dups
	return measureLatency(snap, name, commits), snap, p.Stop()
}

// measureLatency summarises the events of commits received at name.
func measureLatency(s endpointSnapshot, name string, commits []commit) ScaleLatency {
	var lat []time.Duration
	for _, c := range commits {
		if at, ok := s.got[name][c.seq]; ok {
			lat = append(lat, at.Sub(s.ins[c.seq]))
		}
	}
	out := ScaleLatency{Events: len(commits), Missing: len(commits) - len(lat)}
	out.Latency, out.After = summarize(lat), summarize(afterCommit(s, name, commits))
	return out
}

// drainEndpoint inserts -backlog pending deliveries for endpoint name (id)
// and drains them (see drain).
func (s scaler) drainEndpoint(ctx context.Context, cons *endpointConsumer, name, id string, hang map[string]bool) (ScaleDrain, endpointSnapshot, error) {
	n := s.opt.backlog
	if err := s.insertQueue(ctx, id, scaleDrainSeq, n, 0); err != nil {
		return ScaleDrain{}, endpointSnapshot{}, err
	}
	return s.drain(ctx, cons, []string{name}, n, scaleDrainSeq, hang)
}

// drain starts the worker on the rows already inserted and waits until
// every endpoint of counted received n events with seq >= floor: process
// start to the last of those receipts. It returns the run's record too.
func (s scaler) drain(ctx context.Context, cons *endpointConsumer, counted []string, n int, floor int64, hang map[string]bool) (ScaleDrain, endpointSnapshot, error) {
	return s.drainWith(ctx, cons, counted, n, floor, hang, drainRun{perRow: 10 * time.Millisecond})
}

// drainRun is what a drain may add to the plain one.
type drainRun struct {
	env []string // beside scaleEnv
	// perRow is how long each delivery may take, beyond a minute, before
	// the drain gives up waiting (the rest counted missing).
	perRow time.Duration
	// inspect, when set, sees the worker after the drain, before it stops.
	inspect func(*proc)
}

// drainWith is drain with run's additions.
func (s scaler) drainWith(ctx context.Context, cons *endpointConsumer, counted []string, n int, floor int64, hang map[string]bool,
	run drainRun) (ScaleDrain, endpointSnapshot, error) {
	cons.reset(floor, hang)
	cons.count(counted)
	start := time.Now()
	p, err := s.sys.start(ctx, append(append([]string(nil), scaleEnv...), run.env...))
	if err != nil {
		return ScaleDrain{}, endpointSnapshot{}, err
	}
	defer p.Stop()
	if err := cons.await(ctx, n, time.Minute+time.Duration(n*len(counted))*run.perRow); err != nil && !errors.Is(err, errMissing) {
		return ScaleDrain{}, endpointSnapshot{}, err
	}
	snap := cons.snapshot()
	s.sc.Duplicates += snap.dups
	if run.inspect != nil {
		run.inspect(p)
	}
	return drainOf(snap, counted, n, start), snap, p.Stop()
}

// insertQueue inserts n pending deliveries for endpoint id with seqs
// first, first+1, …, in statements of at most insertChunk rows, as a bulk
// producer does, then analyzes the table. Their created_at (the due time)
// is spread evenly over the span before now, oldest first; span 0: now.
func (s scaler) insertQueue(ctx context.Context, id string, first int64, n int, span time.Duration) error {
	t := time.Now().UnixNano()
	for from := 0; from < n; from += insertChunk {
		to := min(n, from+insertChunk)
		if _, err := s.pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id, created_at)
			SELECT 'bench.event', jsonb_build_object('seq', $1::bigint + g, 't', $2::bigint), $3::uuid,
			       now() - make_interval(secs => $6::float8 * (1 - g::float8 / $5))
			FROM generate_series($4::bigint, $7::bigint - 1) AS g`,
			first, t, id, from, float64(n), span.Seconds(), to); err != nil {
			return fmt.Errorf("insert deliveries: %w", err)
		}
	}
	return s.analyze(ctx, false)
}

// analyze refreshes the outbox's statistics, after a VACUUM when vacuum is
// set (a real table with that history would have been vacuumed).
func (s scaler) analyze(ctx context.Context, vacuum bool) error {
	stmt := "ANALYZE webhook_outbox"
	if vacuum {
		stmt = "VACUUM (ANALYZE) webhook_outbox"
	}
	if _, err := s.pool.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
}
