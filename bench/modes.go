package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The modes, by the names -modes takes, in the order they run.
const (
	modeLatency  = "latency"
	modeDrain    = "drain"
	modeBurst    = "burst"
	modeCost     = "cost"
	modeRetry    = "retry"
	modeTail     = "tail"
	modeTailHang = "tail-hang"
	modeNoisy    = "noisy"
	modeFanout   = "fanout"
)

// allModes are the modes run by default.
var allModes = []string{modeLatency, modeDrain, modeBurst, modeCost, modeRetry, modeTail, modeTailHang, modeNoisy, modeFanout}

// knownModes are every mode -modes takes, in the order they run: the
// default ones, flow (modes_flow.go: only when named, it runs for
// minutes), then the scale modes (modes_scale.go), the ordering modes and
// fanout-filter (modes_filter.go).
var knownModes = append(append(append(append(append([]string(nil), allModes...), modeFlow), scaleModes...), orderModes...), modeFanoutFilter)

// latencyInterval is the gap between latency-mode events.
const latencyInterval = 10 * time.Millisecond

// LatencyResult is the latency mode's outcome.
type LatencyResult struct {
	Events   int           `json:"events"`
	Interval time.Duration `json:"interval_ns"`
	Latency  Percentiles   `json:"latency"`
	Commit   Percentiles   `json:"commit"`       // insert start to COMMIT returned: the producer's share
	After    Percentiles   `json:"after_commit"` // COMMIT returned to receipt: the system's share
	Missing  int           `json:"missing"`
}

// DrainResult is the drain mode's outcome.
type DrainResult struct {
	Rows       int           `json:"rows"`
	Elapsed    time.Duration `json:"elapsed_ns"` // process start to last receipt
	PerSecond  float64       `json:"deliveries_per_second"`
	CPUPer1000 float64       `json:"cpu_seconds_per_1000"`
	// DBCPUPer1000 is the CPU of the system's PostgreSQL backends.
	DBCPUPer1000 float64 `json:"db_cpu_seconds_per_1000"`
	PeakRSS      int64   `json:"peak_rss_bytes"`
	Missing      int     `json:"missing"`
}

// BurstResult is the burst mode's outcome.
type BurstResult struct {
	Producers     int           `json:"producers"`
	Duration      time.Duration `json:"duration_ns"`
	Inserted      int           `json:"inserted"`
	InsertRate    float64       `json:"inserts_per_second"`
	DeliveredRate float64       `json:"deliveries_per_second"` // inserted / (start to last receipt)
	Ratio         float64       `json:"delivered_to_insert_ratio"`
	Latency       Percentiles   `json:"latency"`
	Commit        Percentiles   `json:"commit"`       // insert start to COMMIT returned
	After         Percentiles   `json:"after_commit"` // COMMIT returned to receipt
	CPUPer1000    float64       `json:"cpu_seconds_per_1000"`
	DBCPUPer1000  float64       `json:"db_cpu_seconds_per_1000"` // the system's PostgreSQL backends
	Missing       int           `json:"missing"`
}

// CostResult is the producer-cost mode's outcome.
type CostResult struct {
	Producers   int           `json:"producers"`
	RunDuration time.Duration `json:"run_duration_ns"`
	On          []float64     `json:"trigger_on_commits_per_second"`
	Off         []float64     `json:"trigger_off_commits_per_second"`
	Ratio       float64       `json:"ratio"` // mean(On) / mean(Off)
}

// RetryResult is the retry mode's outcome.
type RetryResult struct {
	Events   int         `json:"events"`
	Lateness Percentiles `json:"lateness"` // attempt-2 receipt minus its due time
	Early    int         `json:"early"`    // retries received before their due time
	Missing  int         `json:"missing"`
}

// runner runs the modes against one system.
type runner struct {
	opt  options
	sys  system
	pool *pgxpool.Pool // producers' pool on the system's database
	cons *consumer
	// round is the round being run (from 1), for -dump's file names.
	round int
}

// session starts the system for one mode: the queue is emptied and the
// consumer starts a new run before the process starts.
func (r *runner) session(ctx context.Context, env []string, warm bool) (*proc, error) {
	if err := r.sys.reset(ctx); err != nil {
		return nil, fmt.Errorf("reset: %w", err)
	}
	r.cons.reset(0, profileInstant)
	p, err := r.sys.start(ctx, env)
	if err != nil {
		return nil, err
	}
	if warm && r.sys.PollInterval() == 0 {
		if err := r.warmUp(ctx); err != nil {
			_ = p.Stop()
			return nil, err
		}
	}
	return p, nil
}

// warmDuration is how long the producers insert to warm a system up, so
// that its connection pools and HTTP connections have grown to their
// working size before anything is measured.
const warmDuration = 500 * time.Millisecond

// warmUp has every producer insert for warmDuration and waits until all of
// it is delivered: the readiness condition for systems without /readyz, and
// the warm-up for all. Warm-up events have negative seqs, so that the
// measured runs, which record seq >= 0 only, never count one.
func (r *runner) warmUp(ctx context.Context) error {
	r.cons.reset(math.MinInt64, profileInstant)
	var seq atomic.Int64
	commits, _, err := producers(ctx, r.pool, r.sys, r.opt.producers, warmDuration, func() int64 { return -seq.Add(1) })
	if err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if err := r.cons.await(ctx, len(commits), readyTimeout); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	r.cons.reset(0, profileInstant)
	return nil
}

// paced inserts n events, one every interval, and waits for their delivery.
// It returns how long each insert took to commit and how many events did
// not arrive.
func (r *runner) paced(ctx context.Context, n int, interval time.Duration) (commits []commit, missing int, err error) {
	start := time.Now()
	commits = make([]commit, 0, n)
	for i := range n {
		time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		t := time.Now()
		if err := produce(ctx, r.pool, r.sys, event{Seq: int64(i), T: t.UnixNano()}); err != nil {
			return nil, 0, fmt.Errorf("insert: %w", err)
		}
		commits = append(commits, commit{seq: int64(i), d: time.Since(t)})
	}
	missing, err = r.awaitAll(ctx, n, 30*time.Second+2*r.sys.PollInterval())
	return commits, missing, err
}

// awaitAll waits for n events; a timeout is not an error but a count of
// missing events, reported in the table.
func (r *runner) awaitAll(ctx context.Context, n int, timeout time.Duration) (int, error) {
	err := r.cons.await(ctx, n, timeout)
	if errors.Is(err, errMissing) {
		return n - r.cons.delivered(), nil
	}
	return 0, err
}

func (r *runner) latency(ctx context.Context) (*LatencyResult, error) {
	p, err := r.session(ctx, nil, true)
	if err != nil {
		return nil, err
	}
	defer p.Stop()
	n, interval := r.opt.events, latencyInterval
	if poll := r.sys.PollInterval(); poll > 0 {
		// Spread the events over a little more than one poll interval, so
		// that they sample every phase of it.
		n = r.opt.pollEvents
		interval = poll * 11 / 10 / time.Duration(n)
	}
	commits, missing, err := r.paced(ctx, n, interval)
	if err != nil {
		return nil, err
	}
	snap := r.cons.snapshot()
	if err := r.dump(modeLatency, snap, commits); err != nil {
		return nil, err
	}
	res := &LatencyResult{Events: n, Interval: interval, Latency: summarize(snap.latencies()), Missing: missing}
	res.Commit, res.After = commitSplit(snap, commits)
	return res, p.Stop()
}

func (r *runner) drain(ctx context.Context) (*DrainResult, error) {
	if err := r.sys.reset(ctx); err != nil {
		return nil, fmt.Errorf("reset: %w", err)
	}
	n := r.opt.backlog
	if err := r.sys.insertBacklog(ctx, n); err != nil {
		return nil, fmt.Errorf("backlog: %w", err)
	}
	r.cons.reset(0, profileInstant)
	start := time.Now()
	p, err := r.sys.start(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer p.Stop()
	missing, err := r.awaitAll(ctx, n, time.Minute+time.Duration(n)*10*time.Millisecond)
	if err != nil {
		return nil, err
	}
	cpu, err := p.CPU()
	if err != nil {
		return nil, err
	}
	dbCPU, err := backendCPU(ctx, r.pool, r.sys.backendApps())
	if err != nil {
		return nil, err
	}
	rss, err := p.PeakRSS()
	if err != nil {
		return nil, err
	}
	s := r.cons.snapshot()
	got := len(s.got)
	elapsed := s.last.Sub(start)
	return &DrainResult{Rows: n, Elapsed: elapsed, PerSecond: perSecond(got, elapsed),
		CPUPer1000: cpuPer1000(cpu, got), DBCPUPer1000: cpuPer1000(dbCPU, got), PeakRSS: rss, Missing: missing}, p.Stop()
}

// commitSplit divides each delivered event's latency into the producer's
// commit and what came after it.
func commitSplit(s runState, commits []commit) (commit, after Percentiles) {
	var c, a []time.Duration
	for _, cm := range commits {
		c = append(c, cm.d)
		if rc, ok := s.got[cm.seq]; ok {
			a = append(a, rc.At.Sub(rc.Inserted.Add(cm.d)))
		}
	}
	return summarize(c), summarize(a)
}

func cpuPer1000(cpu time.Duration, n int) float64 {
	if n == 0 {
		return 0
	}
	return cpu.Seconds() / (float64(n) / 1000)
}

func (r *runner) burst(ctx context.Context) (*BurstResult, error) {
	p, err := r.session(ctx, nil, true)
	if err != nil {
		return nil, err
	}
	defer p.Stop()
	cpu0, err := p.CPU()
	if err != nil {
		return nil, err
	}
	db0, err := backendCPU(ctx, r.pool, r.sys.backendApps())
	if err != nil {
		return nil, err
	}
	var seq atomic.Int64
	start := time.Now()
	commits, end, err := producers(ctx, r.pool, r.sys, r.opt.producers, r.opt.duration, func() int64 { return seq.Add(1) - 1 })
	if err != nil {
		return nil, err
	}
	n := len(commits)
	missing, err := r.awaitAll(ctx, n, time.Minute+2*r.sys.PollInterval()+time.Duration(n)*10*time.Millisecond)
	if err != nil {
		return nil, err
	}
	cpu1, err := p.CPU()
	if err != nil {
		return nil, err
	}
	db1, err := backendCPU(ctx, r.pool, r.sys.backendApps())
	if err != nil {
		return nil, err
	}
	s := r.cons.snapshot()
	if err := r.dump(modeBurst, s, commits); err != nil {
		return nil, err
	}
	res := &BurstResult{Producers: r.opt.producers, Duration: end.Sub(start), Inserted: n,
		InsertRate: perSecond(n, end.Sub(start)), DeliveredRate: perSecond(len(s.got), s.last.Sub(start)),
		Latency: summarize(s.latencies()), CPUPer1000: cpuPer1000(cpu1-cpu0, len(s.got)),
		DBCPUPer1000: cpuPer1000(db1-db0, len(s.got)), Missing: missing}
	res.Commit, res.After = commitSplit(s, commits)
	if res.InsertRate > 0 {
		res.Ratio = res.DeliveredRate / res.InsertRate
	}
	return res, p.Stop()
}

func (r *runner) runMode(ctx context.Context, mode string, res *SystemResult) error {
	var err error
	switch mode {
	case modeLatency:
		res.Latency, err = r.latency(ctx)
	case modeDrain:
		res.Drain, err = r.drain(ctx)
	case modeBurst:
		res.Burst, err = r.burst(ctx)
	case modeCost:
		res.Cost, err = r.cost(ctx)
	case modeRetry:
		res.Retry, err = r.retry(ctx)
	case modeTail:
		res.Tail, err = r.tail(ctx, profileTail)
	case modeTailHang:
		res.TailHang, err = r.tail(ctx, profileHang)
	case modeNoisy:
		res.Noisy, err = r.noisy(ctx)
	case modeFanout:
		res.Fanout, err = r.fanout(ctx)
	case modeFlow:
		res.Flow, err = r.flow(ctx)
	case modeFanoutFilter:
		res.FanoutFilter, err = r.fanoutFilter(ctx)
	case modeScaleBacklog, modeScaleLimited, modeScaleIdle, modeScaleFanout, modeScaleMany, modeScaleHistory,
		modeOrderKeys, modeOrderHot, modeOrderBlocked:
		err = r.scale(ctx, mode, res)
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	return err
}
