package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// The endpoint modes (worker only: River has no endpoints). The worker runs
// without a WEBHOOK_URL endpoint and fans every event out to the endpoints
// the bench inserts into webhook_endpoints, as an operator would, each a
// loopback endpointConsumer endpoint with its own secret, subscribed to
// every event type.
const (
	noisyGood    = 9                     // endpoints that answer at once
	noisyBad     = "bad"                 // the tenth: answers at once in the baseline, hangs in the hang run
	noisyRate    = 100                   // events per second, in total
	noisyTimeout = 2 * time.Second       // WEBHOOK_TIMEOUT_MS of the noisy mode
	fanoutWidth  = 100                   // endpoints of the fanout mode
	fanoutGap    = 20 * time.Millisecond // between two fanout events
	paceLanes    = 4                     // producers taking turns with the paced events
	endpointWait = 30 * time.Second      // for the last receipts after the last insert
)

// endpointEnv removes the WEBHOOK_URL endpoint the bench gives the worker
// (exec keeps the last value of a repeated variable, and the worker reads
// empty as unset): it delivers to the endpoints of webhook_endpoints only.
var endpointEnv = []string{"WEBHOOK_URL=", "WEBHOOK_SECRET="}

// NoisyResult is the noisy-neighbour mode's outcome: the same ten endpoints
// twice, once with every one answering at once and once with "bad"
// hanging every request until the worker's timeout.
type NoisyResult struct {
	Endpoints int           `json:"endpoints"`
	Rate      int           `json:"events_per_second"`
	Duration  time.Duration `json:"duration_ns"`
	Timeout   time.Duration `json:"request_timeout_ns"`
	Baseline  NoisyRun      `json:"baseline"`
	Hang      NoisyRun      `json:"hang"`
}

// NoisyRun is one of the noisy mode's two runs. The latencies are over
// every delivery to the nine good endpoints.
type NoisyRun struct {
	Events     int         `json:"events"`
	Deliveries int         `json:"good_deliveries"`
	After      Percentiles `json:"after_commit"` // COMMIT returned to receipt: the targets' figure
	Latency    Percentiles `json:"latency"`      // insert start to receipt
	// Worst is the good endpoint with the highest after-commit p99.
	Worst    string        `json:"worst_endpoint"`
	WorstP99 time.Duration `json:"worst_endpoint_p99_ns"`
	Missing  int           `json:"missing"` // (good endpoint, event) deliveries not received
	// Duplicates counts repeated deliveries to any endpoint.
	Duplicates int `json:"duplicates"`
	// Bad is what the bad endpoint saw: deliveries answered, requests left
	// unanswered, the most requests open at once (its slots in the worker).
	BadDelivered int `json:"bad_delivered"`
	BadHung      int `json:"bad_hung"`
	BadPeak      int `json:"bad_peak_open"`
	// EndpointCap is WEBHOOK_ENDPOINT_CONCURRENCY as the worker's start-up
	// line says it (0: not seen): where an endpoint's adaptive limit
	// starts, and what it leaves the others at least. Slots is
	// WEBHOOK_CONCURRENCY as the line says it. An endpoint whose limit
	// grew while it answered (the warm-up) holds, when it starts hanging,
	// at most Slots − EndpointCap, until its timeouts cut its limit.
	EndpointCap   int   `json:"endpoint_concurrency"`
	Slots         int   `json:"slots"`
	BadSignatures int64 `json:"bad_signatures"`
	Misrouted     int64 `json:"misrouted"` // x-fluxora-endpoint not the receiving endpoint's name
}

// FanoutResult is the fanout mode's outcome.
type FanoutResult struct {
	Endpoints int           `json:"endpoints"`
	Events    int           `json:"events"`
	Interval  time.Duration `json:"interval_ns"`
	// Last is, per event received by every endpoint, COMMIT returned to the
	// last of its receipts: the target's figure.
	Last       Percentiles `json:"last_after_commit"`
	LastInsert Percentiles `json:"last_latency"` // insert start to the last receipt
	Each       Percentiles `json:"each_after_commit"`
	Missing    int         `json:"missing"`    // (endpoint, event) deliveries not received
	Incomplete int         `json:"incomplete"` // events some endpoint did not receive (not in Last)
	Duplicates int         `json:"duplicates"`
	// BadSignatures and Misrouted are as in NoisyRun.
	BadSignatures int64 `json:"bad_signatures"`
	Misrouted     int64 `json:"misrouted"`
}

// noisy runs the ten endpoints at noisyRate for -noisy-duration, first with
// every endpoint answering at once (the baseline), then with "bad" hanging.
func (r *runner) noisy(ctx context.Context) (*NoisyResult, error) {
	// The single consumer gets nothing here: a fresh run of it keeps
	// runSystem from counting the last mode's duplicates again.
	r.cons.reset(0, profileInstant)
	names := make([]string, 0, noisyGood+1)
	for i := range noisyGood {
		names = append(names, fmt.Sprintf("good-%d", i+1))
	}
	cons, err := newEndpointConsumer(append(names, noisyBad), false)
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	if err := r.setEndpoints(ctx, cons.endpoints); err != nil {
		return nil, err
	}
	defer r.clearEndpoints(context.WithoutCancel(ctx)) //nolint:errcheck // the next mode's reset empties the outbox anyway
	res := &NoisyResult{Endpoints: len(cons.endpoints), Rate: noisyRate, Duration: r.opt.noisyDuration, Timeout: noisyTimeout}
	env := append(append([]string(nil), endpointEnv...), "WEBHOOK_TIMEOUT_MS="+strconv.FormatInt(noisyTimeout.Milliseconds(), 10))
	for _, run := range []struct {
		out  *NoisyRun
		hang bool
	}{{&res.Baseline, false}, {&res.Hang, true}} {
		if err := r.noisyRun(ctx, cons, env, names, run.hang, run.out); err != nil {
			return nil, fmt.Errorf("hang=%v: %w", run.hang, err)
		}
	}
	return res, nil
}

// noisyRun is one run of the noisy mode on a freshly started worker.
func (r *runner) noisyRun(ctx context.Context, cons *endpointConsumer, env, good []string, hang bool, out *NoisyRun) error {
	interval := time.Second / noisyRate
	p, err := r.endpointSession(ctx, cons, env, interval)
	if err != nil {
		return err
	}
	defer p.Stop()
	out.EndpointCap, out.Slots = endpointCap(p.Tail()), startedSlots(p.Tail())
	bad0, mis0 := cons.badSignatures.Load(), cons.misrouted.Load()
	cons.reset(0, map[string]bool{noisyBad: hang})
	if hang {
		cons.count(good)
	} else {
		// Answering, bad is awaited too: its last receipt may come after
		// the good ones'.
		cons.count(append(slices.Clone(good), noisyBad))
	}
	n := max(1, int(r.opt.noisyDuration.Seconds()*noisyRate))
	commits, err := r.pace(ctx, n, interval, 0)
	if err != nil {
		return err
	}
	if err := cons.await(ctx, n, endpointWait); err != nil && !errors.Is(err, errMissing) {
		return err
	}
	s := cons.snapshot()
	out.measure(s, commits, good)
	out.BadSignatures, out.Misrouted = cons.badSignatures.Load()-bad0, cons.misrouted.Load()-mis0
	return p.Stop()
}

// measure fills in a noisy run's figures from its record.
func (out *NoisyRun) measure(s endpointSnapshot, commits []commit, good []string) {
	out.Events = len(commits)
	var after, lat []time.Duration
	for _, name := range good {
		mine := afterCommit(s, name, commits)
		after, lat = append(after, mine...), append(lat, latencies(s, name)...)
		out.Missing += len(commits) - len(s.got[name])
		if p := summarize(mine); out.Worst == "" || p.P99 > out.WorstP99 {
			out.Worst, out.WorstP99 = name, p.P99
		}
	}
	out.Deliveries = len(after)
	out.After, out.Latency = summarize(after), summarize(lat)
	out.Duplicates = s.dups
	out.BadDelivered, out.BadHung, out.BadPeak = len(s.got[noisyBad]), s.hung[noisyBad], s.peak[noisyBad]
}

// afterCommit is, for every event endpoint name received, COMMIT returned
// to its receipt.
func afterCommit(s endpointSnapshot, name string, commits []commit) []time.Duration {
	var out []time.Duration
	for _, c := range commits {
		if at, ok := s.got[name][c.seq]; ok {
			out = append(out, at.Sub(s.ins[c.seq].Add(c.d)))
		}
	}
	return out
}

// latencies is, for every event endpoint name received, insert start to
// receipt.
func latencies(s endpointSnapshot, name string) []time.Duration {
	var out []time.Duration
	for seq, at := range s.got[name] {
		out = append(out, at.Sub(s.ins[seq]))
	}
	return out
}

// fanout inserts -fanout-events events, one every fanoutGap, each fanned out
// to fanoutWidth endpoints on one loopback server, and measures per event
// the time from its commit to the last of its receipts.
func (r *runner) fanout(ctx context.Context) (*FanoutResult, error) {
	r.cons.reset(0, profileInstant) // as in noisy
	names := make([]string, fanoutWidth)
	for i := range names {
		names[i] = fmt.Sprintf("ep-%03d", i)
	}
	cons, err := newEndpointConsumer(names, true)
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	if err := r.setEndpoints(ctx, cons.endpoints); err != nil {
		return nil, err
	}
	defer r.clearEndpoints(context.WithoutCancel(ctx)) //nolint:errcheck // the next mode's reset empties the outbox anyway
	p, err := r.endpointSession(ctx, cons, endpointEnv, fanoutGap)
	if err != nil {
		return nil, err
	}
	defer p.Stop()
	bad0, mis0 := cons.badSignatures.Load(), cons.misrouted.Load()
	cons.reset(0, nil)
	cons.count(names)
	n := r.opt.fanoutEvents
	commits, err := r.pace(ctx, n, fanoutGap, 0)
	if err != nil {
		return nil, err
	}
	if err := cons.await(ctx, n, endpointWait); err != nil && !errors.Is(err, errMissing) {
		return nil, err
	}
	res := &FanoutResult{Endpoints: len(names), Events: n, Interval: fanoutGap}
	res.measure(cons.snapshot(), commits, names)
	res.BadSignatures, res.Misrouted = cons.badSignatures.Load()-bad0, cons.misrouted.Load()-mis0
	return res, p.Stop()
}

// measure fills in the fanout figures from the run's record.
func (res *FanoutResult) measure(s endpointSnapshot, commits []commit, names []string) {
	var last, lastIns, each []time.Duration
	for _, c := range commits {
		committed := s.ins[c.seq].Add(c.d)
		var latest time.Time
		complete := true
		for _, name := range names {
			at, ok := s.got[name][c.seq]
			if !ok {
				res.Missing++
				complete = false
				continue
			}
			each = append(each, at.Sub(committed))
			if at.After(latest) {
				latest = at
			}
		}
		if !complete {
			res.Incomplete++
			continue
		}
		last, lastIns = append(last, latest.Sub(committed)), append(lastIns, latest.Sub(s.ins[c.seq]))
	}
	res.Last, res.LastInsert, res.Each = summarize(last), summarize(lastIns), summarize(each)
	res.Duplicates = s.dups
}

// endpointSession empties the outbox, starts the worker with env and warms
// it up: events for warmDuration, one every interval, each delivered to
// every endpoint, so that its pools and its connections to every endpoint
// have grown before anything is measured. The warm-up events have negative
// seqs; the measured run records seq >= 0 only.
func (r *runner) endpointSession(ctx context.Context, cons *endpointConsumer, env []string, interval time.Duration) (*proc, error) {
	if err := r.sys.reset(ctx); err != nil {
		return nil, fmt.Errorf("reset: %w", err)
	}
	cons.reset(math.MinInt64, nil)
	all := make([]string, len(cons.endpoints))
	for i, ep := range cons.endpoints {
		all[i] = ep.name
	}
	cons.count(all)
	p, err := r.sys.start(ctx, env)
	if err != nil {
		return nil, err
	}
	n := max(1, int(warmDuration/interval))
	if _, err = r.pace(ctx, n, interval, -int64(n)); err == nil {
		err = cons.await(ctx, n, readyTimeout)
	}
	if err != nil {
		_ = p.Stop()
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	return p, nil
}

// pace inserts n events with seqs first, first+1, …, event i at i ×
// interval from the start, on paceLanes producers in turn, so that one slow
// commit does not hold back the events after it. It returns every event's
// commit, by i.
func (r *runner) pace(ctx context.Context, n int, interval time.Duration, first int64) ([]commit, error) {
	return r.paceWith(ctx, n, interval, first, r.sys.insert)
}

// inserter writes one event in a producer's transaction.
type inserter func(ctx context.Context, tx pgx.Tx, ev event) error

// paceWith is pace with insert writing each event.
func (r *runner) paceWith(ctx context.Context, n int, interval time.Duration, first int64, insert inserter) ([]commit, error) {
	start := time.Now()
	commits := make([]commit, n)
	errs := make([]error, paceLanes)
	var wg sync.WaitGroup
	for lane := range paceLanes {
		wg.Go(func() {
			for i := lane; i < n && ctx.Err() == nil; i += paceLanes {
				time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
				t := time.Now()
				ev := event{Seq: first + int64(i), T: t.UnixNano()}
				if err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error { return insert(ctx, tx, ev) }); err != nil {
					errs[lane] = fmt.Errorf("insert: %w", err)
					return
				}
				commits[i] = commit{seq: ev.Seq, d: time.Since(t)}
			}
			if errs[lane] == nil {
				errs[lane] = ctx.Err()
			}
		})
	}
	wg.Wait()
	return commits, errors.Join(errs...)
}

// setEndpoints replaces the endpoints of webhook_endpoints with eps, each
// subscribed to every event type, as an operator's INSERT does.
func (r *runner) setEndpoints(ctx context.Context, eps []*endpoint) error {
	if err := r.clearEndpoints(ctx); err != nil {
		return err
	}
	var names, urls, secrets []string
	for _, ep := range eps {
		names, urls, secrets = append(names, ep.name), append(urls, ep.url), append(secrets, string(ep.secret))
	}
	_, err := r.pool.Exec(ctx, `INSERT INTO webhook_endpoints (name, url, secret, event_types)
		SELECT name, url, secret, '{}' FROM unnest($1::text[], $2::text[], $3::text[]) AS e(name, url, secret)`,
		names, urls, secrets)
	if err != nil {
		return fmt.Errorf("insert endpoints: %w", err)
	}
	return nil
}

// clearEndpoints empties the outbox and removes every endpoint, so that the
// other modes deliver to the WEBHOOK_URL endpoint only.
func (r *runner) clearEndpoints(ctx context.Context) error {
	if err := r.sys.reset(ctx); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	if _, err := r.pool.Exec(ctx, "DELETE FROM webhook_endpoints"); err != nil {
		return fmt.Errorf("remove endpoints: %w", err)
	}
	return nil
}

// endpointCap reads endpoint_concurrency from the worker's "worker:
// started" line among lines; 0 when it is not there.
// startedSlots is the concurrency of the "worker: started" line among
// lines (0: none).
func startedSlots(lines string) int {
	for line := range strings.SplitSeq(lines, "\n") {
		if n, err := strconv.Atoi(startedConcurrency(line)); err == nil {
			return n
		}
	}
	return 0
}

func endpointCap(lines string) int {
	for line := range strings.SplitSeq(lines, "\n") {
		var l struct {
			Msg string `json:"msg"`
			Cap int    `json:"endpoint_concurrency"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "worker: started" {
			return l.Cap
		}
	}
	return 0
}
