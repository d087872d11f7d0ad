// Package dispatcher is the delivery pipeline: it claims due rows when
// woken, delivers each on a slot of its own, and records the outcomes in
// batches.
//
// Every slot is independent. A claim takes at most as many rows as there
// are free slots, in one short statement that leases them; each row is then
// attempted on its own goroutine; its outcome goes to the completer, which
// writes many outcomes per statement, and the slot takes new work at once.
// No row waits for another row's request, and no transaction stays open
// across one.
//
// The package knows neither SQL nor HTTP nor Redis: cmd/worker hands it a
// Store (package outbox's), a Sender, a Gate and a Hush through the small
// interfaces declared here.
package dispatcher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fluxora/webhook-worker/webhook"
)

// Defaults of Config.
const (
	BatchSizeDefault     = 10
	LeaseDefault         = 30 * time.Second
	ConcurrencyDefault   = 100
	MaxAttemptsDefault   = 16
	PollIntervalDefault  = 10 * time.Second
	SweepIntervalDefault = time.Second
	ClaimCooldownDefault = time.Millisecond
	BackoffBaseDefault   = time.Second
	BackoffMaxDefault    = time.Hour
)

// EndpointConcurrencyDefault is Config.EndpointConcurrency's default for a
// given Concurrency: a quarter of the slots, so that even three endpoints
// hanging at once leave a quarter to every other endpoint.
func EndpointConcurrencyDefault(concurrency int) int { return max(1, concurrency/4) }

// DefaultEndpointName is the name of the WEBHOOK_URL endpoint: its
// x-fluxora-endpoint header and its endpoint metric label.
const DefaultEndpointName = "default"

// Config configures a Dispatcher.
type Config struct {
	// Store claims rows and records outcomes. Required.
	Store Store
	// Sender makes the HTTP attempts. Required.
	Sender Sender
	// Gate is consulted before and told after each attempt. Nil allows
	// everything.
	Gate Gate
	// Hush is told when the worker is busy. Nil: producers always notify.
	Hush Hush
	// Disabler disables an endpoint that answered 410 Gone. Nil: such an
	// endpoint's deliveries are only dead-lettered.
	Disabler Disabler
	// EnvEndpoint says there is a WEBHOOK_URL endpoint (each claim's
	// Query.Env): an event's own row is then that endpoint's delivery.
	// Without one an event is only fanned out to the endpoints of
	// webhook_endpoints, and the WEBHOOK_URL endpoint's deliveries (left
	// by another worker, or replayed) stay pending for a worker that has
	// one.
	EnvEndpoint bool
	// EnvFlow is the WEBHOOK_URL endpoint's flow control (each claim's
	// Query.EnvFlow), held across every worker by the claim.
	EnvFlow webhook.Flow
	// Wake receives a value when rows may be due (the listener). Required.
	Wake <-chan struct{}
	// Registerer receives the dispatcher's metrics. Required.
	Registerer prometheus.Registerer
	// Logger defaults to discarding.
	Logger *slog.Logger

	// BatchSize is the most rows of a claim after a quiet moment (the
	// first claim, or one after a claim that left nothing): while claims
	// leave rows behind (full, or More), the next takes up to every free
	// slot instead. Defaults to BatchSizeDefault (10); negative is an
	// error.
	BatchSize int
	// Lease is how long, by the database clock, a claim holds its rows
	// (each claim's Query.Lease): longer than the worst case from the
	// claim to the recorded outcome (the request timeout plus the gates
	// plus a margin). Defaults to LeaseDefault (30s); below 1ms is an
	// error.
	Lease time.Duration
	// Concurrency is the number of delivery slots: rows held at once.
	// Defaults to 100.
	Concurrency int
	// EndpointConcurrency is where each endpoint's adaptive limit starts
	// (it grows by one per 2xx up to Concurrency and halves on a retryable
	// failure, at least 1), and the share of the slots an endpoint keeps
	// whatever the others hold; while other endpoints want slots, an
	// endpoint holds at most what they leave and never their last
	// EndpointConcurrency (see capOf). Rows of an endpoint at its limit
	// wait in the table, unread and no attempt spent. Defaults to a
	// quarter of Concurrency (EndpointConcurrencyDefault), at least 1.
	EndpointConcurrency int
	// MaxAttempts before a retryable failure is dead-lettered. Defaults
	// to 16.
	MaxAttempts int
	// PollInterval is the fallback poll, which also re-reads when the next
	// scheduled row is due. Defaults to 10s.
	PollInterval time.Duration
	// SweepInterval: a worker that has not claimed for this long claims
	// anyway, which takes over rows whose lease expired (their worker died)
	// within SweepInterval of the expiry. Defaults to 1s.
	SweepInterval time.Duration
	// ClaimCooldown is the least time between two claims that cannot fill
	// a whole batch, so that slots freed one by one are claimed for
	// together. Defaults to 1ms.
	ClaimCooldown time.Duration
	// FlushInterval is how long the first outcome waits for others to be
	// written with it. Defaults to FlushIntervalDefault (1ms).
	FlushInterval time.Duration
	// FlushMax is the most outcomes per write. Defaults to FlushMaxDefault
	// (500).
	FlushMax int
	// BackoffBase is the delay before the first retry, doubling per
	// attempt up to BackoffMax, ±20%. Defaults to 1s and 1h.
	BackoffBase, BackoffMax time.Duration
	// DeferMax is the longest a gate's refusal defers a row; a longer
	// deferral is cut to it, a shorter than 1ms raised to 1ms (what the
	// gate said is state read from Redis, not trusted). Defaults to
	// BackoffMax.
	DeferMax time.Duration
	// Rand returns uniform values in [0,1) for the jitter. Required.
	Rand func() float64
	// Now defaults to time.Now.
	Now func() time.Time
}

// Dispatcher claims, delivers and records. Its loop state is owned by the
// Run goroutine; delivery goroutines report back on freed.
type Dispatcher struct {
	cfg    Config
	store  Store
	sender Sender
	gate   Gate
	hush   Hush
	off    Disabler
	log    *slog.Logger
	m      *metrics
	done   *completer
	freed  chan slotDone // each slot given back
	wg     sync.WaitGroup

	inflight  int                  // slots in use
	held      map[string]int       // slots in use by endpoint id ("" WEBHOOK_URL)
	limits    map[string]int       // adaptive limits that differ from EndpointConcurrency (limitOf)
	cut       map[string]time.Time // when each endpoint's limit was last halved
	parked    map[string]time.Time // endpoints not claimed for until then (a gate deferred them)
	active    map[string]time.Time // when each endpoint's rows were last claimed
	starved   bool                 // the last drain stopped with rows perhaps left (no slot, cooldown)
	capped    bool                 // the last claim skipped an endpoint at its cap that holds slots (cappedBy)
	backlog   bool                 // the last claim left rows: the next takes every free slot (claimSize)
	lastClaim time.Time
	// flowWait says the last claim was held back by flow control: a write
	// of outcomes may make room, so the loop claims again after one.
	flowWait bool

	due     *time.Timer
	dueAt   time.Time
	recheck *time.Timer
	step    int // index into recheckDelays of the armed recheck; -1 none
	cool    *time.Timer
	sweep   *time.Timer // re-armed by every claim: fires after SweepInterval without one

	lastRows time.Time // when a claim last found rows
	busy     bool      // last state asked of the hush
}

// New returns a Dispatcher or an error naming the missing or bad field.
func New(cfg Config) (*Dispatcher, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("dispatcher: Store is required")
	case cfg.Sender == nil:
		return nil, errors.New("dispatcher: Sender is required")
	case cfg.Wake == nil:
		return nil, errors.New("dispatcher: Wake is required")
	case cfg.Registerer == nil:
		return nil, errors.New("dispatcher: Registerer is required")
	case cfg.Rand == nil:
		return nil, errors.New("dispatcher: Rand is required")
	case cfg.BatchSize < 0:
		return nil, fmt.Errorf("dispatcher: BatchSize must be positive, got %d", cfg.BatchSize)
	case cfg.Lease < 0 || (cfg.Lease > 0 && cfg.Lease < time.Millisecond):
		return nil, fmt.Errorf("dispatcher: Lease must be at least 1ms, got %s", cfg.Lease)
	}
	cfg.BatchSize = cmp.Or(cfg.BatchSize, BatchSizeDefault)
	cfg.Lease = cmp.Or(cfg.Lease, LeaseDefault)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, ConcurrencyDefault)
	cfg.EndpointConcurrency = cmp.Or(cfg.EndpointConcurrency, EndpointConcurrencyDefault(cfg.Concurrency))
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, MaxAttemptsDefault)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, PollIntervalDefault)
	cfg.SweepInterval = cmp.Or(cfg.SweepInterval, SweepIntervalDefault)
	cfg.ClaimCooldown = cmp.Or(cfg.ClaimCooldown, ClaimCooldownDefault)
	cfg.FlushInterval = cmp.Or(cfg.FlushInterval, FlushIntervalDefault)
	cfg.FlushMax = cmp.Or(cfg.FlushMax, FlushMaxDefault)
	cfg.BackoffBase = cmp.Or(cfg.BackoffBase, BackoffBaseDefault)
	cfg.BackoffMax = cmp.Or(cfg.BackoffMax, BackoffMaxDefault)
	cfg.DeferMax = max(cmp.Or(cfg.DeferMax, cfg.BackoffMax), time.Millisecond)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	d := &Dispatcher{
		cfg: cfg, store: cfg.Store, sender: cfg.Sender, gate: cfg.Gate, hush: cfg.Hush, off: cfg.Disabler,
		log: cfg.Logger, m: newMetrics(cfg.Registerer, cfg.EnvEndpoint), freed: make(chan slotDone, cfg.Concurrency), step: -1,
		held: map[string]int{}, limits: map[string]int{}, cut: map[string]time.Time{}, parked: map[string]time.Time{},
		active: map[string]time.Time{},
	}
	if d.gate == nil {
		d.gate = openGate{}
	}
	if d.hush == nil {
		d.hush = noHush{}
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	d.done = &completer{
		store: cfg.Store, in: make(chan done, cfg.Concurrency), interval: cfg.FlushInterval, max: cfg.FlushMax,
		now: cfg.Now, log: d.log, m: d.m, scheduled: make(chan time.Duration, 1), promoted: make(chan struct{}, 1),
		flushed: make(chan struct{}, 1),
	}
	d.due, d.recheck, d.cool, d.sweep = stoppedTimer(), stoppedTimer(), stoppedTimer(), stoppedTimer()
	return d, nil
}

func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// Run claims and delivers until ctx ends. Then it claims no more, lets the
// attempts in flight finish under work (a context that outlives ctx by the
// shutdown timeout), releases the rows it had not started, writes every
// outcome and returns nil.
func (d *Dispatcher) Run(ctx, work context.Context) error {
	poll := time.NewTicker(d.cfg.PollInterval)
	defer poll.Stop()
	d.sweep.Reset(d.cfg.SweepInterval)
	defer d.sweep.Stop()
	defer d.due.Stop()
	defer d.recheck.Stop()
	defer d.cool.Stop()
	completed := make(chan struct{})
	go func() { d.done.run(work); close(completed) }()

	d.refreshNextDue(ctx)
	d.drain(ctx, work, false)
	for {
		select {
		case <-ctx.Done():
			d.setBusy(false)
			d.wg.Wait()
			close(d.done.in)
			<-completed
			return nil
		case <-d.cfg.Wake:
			d.drain(ctx, work, false)
		case <-poll.C:
			d.m.pollWakeups.Inc()
			d.refreshNextDue(ctx)
			d.drain(ctx, work, false)
		case <-d.sweep.C:
			d.sweep.Reset(d.cfg.SweepInterval)
			d.drain(ctx, work, false)
		case <-d.due.C:
			d.dueAt = time.Time{}
			d.drain(ctx, work, false)
			d.refreshNextDue(ctx)
		case <-d.recheck.C:
			d.drain(ctx, work, true)
		case <-d.cool.C:
			d.drain(ctx, work, false)
		case after := <-d.done.scheduled:
			d.armDue(after)
		case <-d.done.promoted:
			d.drain(ctx, work, false)
		case <-d.done.flushed:
			if d.flowWait {
				// The claim before was held back by flow control, which
				// the rows just ended may have made room under.
				d.drain(ctx, work, false)
			}
		case s := <-d.freed:
			d.free(s)
			switch {
			case d.starved:
				d.drain(ctx, work, false)
			case d.capped:
				// Slots freed one by one are claimed for together.
				if wait := d.cooldownLeft(); wait > 0 {
					d.cool.Reset(wait)
				} else {
					d.drain(ctx, work, false)
				}
			}
		}
	}
}

// start runs one row on a slot of its own; a row over its endpoint's cap
// is only given back.
func (d *Dispatcher) start(ctx, work context.Context, r webhook.Delivery, overCap bool) {
	d.inflight++
	d.held[r.EndpointID]++
	s := slotDone{endpoint: r.EndpointID, label: d.label(r), started: d.cfg.Now()}
	d.wg.Add(1)
	go d.slot(ctx, work, r, s, overCap) // arguments, not a closure: the row stays off the heap
}

// slot is the goroutine of one row's slot (start).
func (d *Dispatcher) slot(ctx, work context.Context, r webhook.Delivery, s slotDone, overCap bool) {
	defer d.wg.Done()
	o := release(r)
	if overCap {
		d.m.capWaits.WithLabelValues(d.label(r)).Inc()
	} else {
		o = d.deliver(ctx, work, r)
		s.signal = signalOf(o)
		if o.Kind == webhook.Defer {
			s.parkFor = o.Delay
		}
		if o.Pause > 0 {
			s.parkFor = o.Pause
		}
	}
	d.done.add(done{row: r, outcome: o, label: d.label(r), capped: overCap})
	d.freed <- s
}

// free gives back a slot, and applies what its attempt says of the
// endpoint (adapt).
func (d *Dispatcher) free(s slotDone) {
	d.inflight--
	if d.held[s.endpoint]--; d.held[s.endpoint] <= 0 {
		delete(d.held, s.endpoint)
	}
	d.adapt(s)
}
