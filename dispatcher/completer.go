package dispatcher

import (
	"context"
	"log/slog"
	"time"

	"github.com/fluxora/webhook-worker/webhook"
)

// Outcomes are written in batches, as River's completer does: the first
// outcome waits at most FlushInterval for others to join it, at most
// FlushMax go in one statement, and outcomes that arrive while a write is
// under way go in the next one, so the batches grow with the load.
const (
	// FlushIntervalDefault is Config.FlushInterval's default.
	FlushIntervalDefault = time.Millisecond
	// FlushMaxDefault is Config.FlushMax's default.
	FlushMaxDefault = 500
)

// A failed write is tried again after flushRetryDelays while the rows'
// leases may still hold; after the last one the rows are left to their
// leases (delivered again once they expire).
var flushRetryDelays = [...]time.Duration{50 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}

// done is one finished row on its way to the database.
type done struct {
	row     webhook.Delivery
	outcome webhook.Outcome
	label   string // the row's endpoint metric label
	capped  bool   // released because its endpoint was at its cap
}

// completer batches outcomes and writes them through the Store. Its run
// goroutine owns everything but in.
type completer struct {
	store    Store
	in       chan done
	interval time.Duration
	max      int
	now      func() time.Time
	log      *slog.Logger
	m        *metrics
	// scheduled receives the earliest delay of the retry and deferred rows
	// just written (capacity 1, the smallest pending value wins).
	scheduled chan time.Duration
	// promoted receives a value when a write let the next row of an
	// ordering lane go (capacity 1).
	promoted chan struct{}
	// flushed receives a value after each write (capacity 1): rows that
	// ended may leave room under an endpoint's flow control.
	flushed chan struct{}
}

// add hands an outcome over; it blocks while the completer is full, which
// holds the delivery slot and so slows claiming down (backpressure).
func (c *completer) add(d done) { c.in <- d }

// run writes outcomes until in is closed and everything in it is written.
// ctx bounds the writes; when it has ended, the final write (releases at a
// forced shutdown) gets a few seconds of its own.
func (c *completer) run(ctx context.Context) {
	var batch []done
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case d, ok := <-c.in:
			if !ok {
				c.flush(ctx, batch)
				return
			}
			batch = append(batch, d)
			if len(batch) == 1 {
				timer.Reset(c.interval)
			}
			if leavesLane(d) {
				// The next row of its lane waits for this write: no wait
				// for others, but those already here go with it.
				batch = c.more(batch)
			} else if len(batch) < c.max {
				continue
			}
		case <-timer.C:
		}
		timer.Stop()
		c.flush(ctx, batch)
		clear(batch) // drop the payloads
		batch = batch[:0]
	}
}

// leavesLane reports whether d's outcome moves a keyed row out of its
// lane (delivered or dead-lettered), letting the lane's next row go.
func leavesLane(d done) bool {
	return d.row.OrderingKey != "" && (d.outcome.Kind == webhook.Done || d.outcome.Kind == webhook.Dead)
}

// more adds to batch the outcomes already waiting, up to max.
func (c *completer) more(batch []done) []done {
	for len(batch) < c.max {
		select {
		case d, ok := <-c.in:
			if !ok {
				return batch // run sees the channel closed next
			}
			batch = append(batch, d)
		default:
			return batch
		}
	}
	return batch
}

// flush writes batch, trying again on database errors.
func (c *completer) flush(ctx context.Context, batch []done) {
	if len(batch) == 0 {
		return
	}
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
	}
	outcomes := make([]webhook.Outcome, len(batch))
	for i, d := range batch {
		outcomes[i] = d.outcome
		if d.row.OrderingKey != "" { // its lane, locked in order by the write
			outcomes[i].EndpointID, outcomes[i].OrderingKey = d.row.EndpointID, d.row.OrderingKey
		}
		if d.row.Event != 0 { // its row is written by the outcome, fenced by its event's lease
			outcomes[i].EndpointID, outcomes[i].Event = d.row.EndpointID, d.row.Event
		}
		if d.outcome.Pause > 0 { // the endpoint paused, for every worker
			outcomes[i].EndpointID = d.row.EndpointID
		}
	}
	for try := 0; ; try++ {
		start := time.Now()
		written, err := c.store.Record(ctx, outcomes)
		if err == nil {
			c.m.flushSize.Observe(float64(len(batch)))
			c.m.flushDuration.Observe(time.Since(start).Seconds())
			c.written(batch, written)
			return
		}
		c.m.commitErrors.Inc()
		if try == len(flushRetryDelays) || !sleep(ctx, flushRetryDelays[try]) {
			c.log.Error("dispatcher: recording outcomes failed; their rows will be delivered again once their leases expire",
				"rows", len(batch), "tries", try+1, "error", err)
			c.m.inFlight.Sub(float64(len(batch)))
			return
		}
		c.log.Warn("dispatcher: recording outcomes failed; trying again", "rows", len(batch), "error", err)
	}
}

// written counts what was written and reports what the fence refused.
func (c *completer) written(batch []done, written []bool) {
	now := c.now()
	var next time.Duration
	hasNext, promoted, released := false, false, 0
	for i, d := range batch {
		if !written[i] {
			c.m.leasesLost.Inc()
			c.log.Warn("dispatcher: lease lost; outcome not recorded: the row's lease expired and another worker took it over",
				"delivery_id", d.row.DeliveryID, "event", d.row.EventType, "endpoint", d.label, "attempt", d.row.Attempt, "outcome", d.outcome.Kind.String())
			continue
		}
		c.m.recorded(d.label, d.outcome.Kind, now.Sub(d.row.CreatedAt))
		if d.outcome.Kind == webhook.Release && !d.capped {
			released++
		}
		if k := d.outcome.Kind; (k == webhook.Retry || k == webhook.Defer) && (!hasNext || d.outcome.Delay < next) {
			next, hasNext = d.outcome.Delay, true
		}
		if leavesLane(d) {
			promoted = true
		}
	}
	c.m.inFlight.Sub(float64(len(batch)))
	select {
	case c.flushed <- struct{}{}:
	default:
	}
	if released > 0 {
		c.log.Info("dispatcher: released rows not started; any worker may take them at once", "rows", released)
	}
	if promoted {
		// The next row of each lane left is its head now: claim at once
		// rather than at the next recheck.
		select {
		case c.promoted <- struct{}{}:
		default:
		}
	}
	if hasNext {
		select {
		case old := <-c.scheduled:
			next = min(next, old)
		default:
		}
		c.scheduled <- next
	}
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
