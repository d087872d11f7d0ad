package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/fluxora/webhook-worker/claimer"
	"github.com/fluxora/webhook-worker/gates"
	"github.com/fluxora/webhook-worker/sender"
)

// batchClaimer is what the dispatcher needs from claimer.Claimer.
type batchClaimer interface {
	Claim(ctx context.Context, limit int) (*claimer.Batch, error)
	NextDue(ctx context.Context) (time.Duration, bool, error)
}

// deliverer is what the dispatcher needs from sender.Sender.
type deliverer interface {
	Send(ctx context.Context, r sender.Request) sender.Result
}

// gate is what the dispatcher needs from gates.Gates.
type gate interface {
	Check(ctx context.Context, consumerURL string, attempt int) gates.Decision
	Record(ctx context.Context, consumerURL string, o gates.Outcome, probe bool)
}

// hush is what the dispatcher needs from listener.Hush.
type hush interface {
	Set(busy bool)
	Help()
}

// noHush is a hush that never holds.
type noHush struct{}

func (noHush) Set(bool) {}
func (noHush) Help()    {}

// recheckDelays is when the dispatcher looks again after a claim found rows:
// a producer that skipped its NOTIFY (another transaction was notifying) may
// commit just after the claim. Each non-empty recheck starts over.
var recheckDelays = [...]time.Duration{time.Millisecond, 4 * time.Millisecond, 16 * time.Millisecond, 64 * time.Millisecond, 256 * time.Millisecond}

// claimErrorDelay is how soon a failed claim is tried again.
const claimErrorDelay = 500 * time.Millisecond

// dispatcherConfig wires a dispatcher.
type dispatcherConfig struct {
	Claimer      batchClaimer
	Sender       deliverer
	Gate         gate
	Hush         hush            // nil: producers always notify
	Wake         <-chan struct{} // from the listener
	URL          string          // the consumer, for the gates
	BatchSize    int             // rows per claim at most
	Concurrency  int             // deliveries in flight at most
	MaxBatches   int             // claim transactions (connections) in flight at most
	MaxAttempts  int
	PollInterval time.Duration
	BackoffBase  time.Duration
	BackoffMax   time.Duration
	Rand         func() float64 // uniform in [0,1), for jitter
	Now          func() time.Time
	Logger       *slog.Logger
	Metrics      *metrics
}

// dispatcher claims due rows when woken, by its poll, or when a scheduled
// row falls due, and delivers each batch on its own goroutine. All its
// fields are owned by the Run goroutine; batches report back on done.
type dispatcher struct {
	cfg      dispatcherConfig
	done     chan batchResult
	wg       sync.WaitGroup
	inflight int // deliveries
	batches  int // claim transactions
	blocked  bool

	due     *time.Timer
	dueAt   time.Time
	recheck *time.Timer
	step    int // index into recheckDelays of the armed recheck; -1 none

	lastRows time.Time // when a claim last found rows
	busy     bool      // last state asked of the hush
}

func (d *dispatcher) setBusy(busy bool) {
	// Busy is repeated: a hold that lost to a notifying producer is tried
	// again.
	if busy || busy != d.busy {
		d.busy = busy
		d.cfg.Hush.Set(busy)
	}
}

// busyGap is how close two claims that find rows must be for the stream to
// count as busy (see drain).
const busyGap = 5 * time.Millisecond

// batchResult is what a finished batch tells the loop.
type batchResult struct {
	rows    int
	next    time.Duration // earliest new row's delay, when any
	hasNext bool
}

func newDispatcher(cfg dispatcherConfig) *dispatcher {
	if cfg.Hush == nil {
		cfg.Hush = noHush{}
	}
	d := &dispatcher{cfg: cfg, done: make(chan batchResult, cfg.MaxBatches), step: -1}
	d.due = stoppedTimer()
	d.recheck = stoppedTimer()
	return d
}

func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// Run claims and delivers until ctx ends, then waits for the batches in
// flight, which run under work (a context that outlives ctx by the shutdown
// timeout), to finish and commit.
func (d *dispatcher) Run(ctx, work context.Context) error {
	poll := time.NewTicker(d.cfg.PollInterval)
	defer poll.Stop()
	defer d.due.Stop()
	defer d.recheck.Stop()
	d.refreshNextDue(ctx)
	d.drain(ctx, work, false)
	for {
		select {
		case <-ctx.Done():
			d.setBusy(false)
			d.wg.Wait()
			return nil
		case <-d.cfg.Wake:
			d.drain(ctx, work, false)
		case <-poll.C:
			d.cfg.Metrics.pollWakeups.Inc()
			d.refreshNextDue(ctx)
			d.drain(ctx, work, false)
		case <-d.due.C:
			d.dueAt = time.Time{}
			d.drain(ctx, work, false)
			d.refreshNextDue(ctx)
		case <-d.recheck.C:
			d.drain(ctx, work, true)
		case r := <-d.done:
			d.inflight -= r.rows
			d.batches--
			if r.hasNext {
				d.armDue(r.next)
			}
			if d.blocked {
				d.drain(ctx, work, false)
			}
		}
	}
}

// drain claims batches while slots are free and rows keep coming. A recheck
// that finds nothing moves on to the next, longer recheck delay; any claim
// that finds rows restarts the recheck sequence.
func (d *dispatcher) drain(ctx, work context.Context, recheck bool) {
	d.blocked = false
	claimed, claims := 0, 0
	for ctx.Err() == nil {
		free := d.cfg.Concurrency - d.inflight
		if free <= 0 || d.batches >= d.cfg.MaxBatches {
			d.blocked = true
			break
		}
		limit := min(d.cfg.BatchSize, free)
		b, err := d.cfg.Claimer.Claim(ctx, limit)
		if err != nil {
			if ctx.Err() == nil {
				d.cfg.Metrics.claimErrors.Inc()
				d.cfg.Logger.Warn("dispatcher: claim failed; trying again", "error", err, "retry_in", claimErrorDelay)
				d.armRecheck(-1, claimErrorDelay)
				d.setBusy(false)
			}
			return
		}
		claims++
		if b == nil {
			break
		}
		claimed += len(b.Rows)
		d.inflight += len(b.Rows)
		d.batches++
		d.cfg.Metrics.batches.Inc()
		d.cfg.Metrics.rows.Add(float64(len(b.Rows)))
		d.wg.Add(1)
		go d.runBatch(work, b)
		if len(b.Rows) < limit {
			break
		}
	}
	// Busy: rows keep coming (this claim found rows, and so did one less
	// than busyGap ago), so the worker will claim again within
	// recheckDelays[0] (or as soon as a batch finishes) whatever producers
	// do, and their NOTIFYs are only cost. A lone event on a sparse stream
	// does not count. An empty claim ends it. A busy worker that is also
	// saturated asks the hush to wake the other workers.
	switch {
	case claimed > 0:
		now := d.cfg.Now()
		if now.Sub(d.lastRows) < busyGap || claims > 1 {
			d.setBusy(true)
		}
		d.lastRows = now
	case !d.blocked:
		d.setBusy(false)
	}
	if d.blocked && d.busy {
		d.cfg.Hush.Help()
	}
	switch {
	case claimed > 0:
		d.armRecheck(0, recheckDelays[0])
	case recheck && d.step+1 < len(recheckDelays):
		d.armRecheck(d.step+1, recheckDelays[d.step+1])
	case recheck:
		d.step = -1
	}
}

func (d *dispatcher) armRecheck(step int, after time.Duration) {
	d.step = step
	d.recheck.Reset(after)
}

// armDue makes sure the loop wakes within after, when the next scheduled row
// falls due.
func (d *dispatcher) armDue(after time.Duration) {
	at := d.cfg.Now().Add(after)
	if !d.dueAt.IsZero() && !at.Before(d.dueAt) {
		return
	}
	d.dueAt = at
	d.due.Reset(after)
}

func (d *dispatcher) refreshNextDue(ctx context.Context) {
	after, ok, err := d.cfg.Claimer.NextDue(ctx)
	if err != nil {
		if ctx.Err() == nil {
			d.cfg.Logger.Warn("dispatcher: reading the next due time failed", "error", err)
		}
		return
	}
	if ok {
		d.armDue(after)
	}
}
