package dispatcher

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/fluxora/webhook-worker/webhook"
)

// recheckDelays is when the dispatcher looks again after a claim found rows:
// a producer that skipped its NOTIFY (another transaction was notifying, or
// the hush was held) may commit just after the claim. Each non-empty
// recheck starts over.
var recheckDelays = [...]time.Duration{time.Millisecond, 4 * time.Millisecond, 16 * time.Millisecond, 64 * time.Millisecond, 256 * time.Millisecond}

// claimErrorDelay is how soon a failed claim is tried again.
const claimErrorDelay = 500 * time.Millisecond

// busyGap is how close two claims that find rows must be for the stream to
// count as busy (see drain).
const busyGap = 5 * time.Millisecond

// drain claims while slots are free and rows keep coming. A claim takes
// at most BatchSize rows, or every free slot while the claim before it
// left rows (claimSize). A claim that cannot fill a whole batch waits for
// ClaimCooldown after the previous claim, so that under saturation the
// slots freed meanwhile are claimed for together. A recheck that finds
// nothing moves on to the next, longer recheck delay; any claim that finds
// rows restarts the sequence.
func (d *Dispatcher) drain(ctx, work context.Context, recheck bool) {
	d.collectFreed()
	d.starved, d.capped = false, false
	claimed, claims := 0, 0
	for ctx.Err() == nil {
		free := d.cfg.Concurrency - d.inflight
		if free <= 0 {
			d.starved = true
			break
		}
		limit := d.claimSize(free)
		if wait := d.cooldownLeft(); limit < d.cfg.BatchSize && wait > 0 {
			d.starved = true
			d.cool.Reset(wait)
			break
		}
		// The claim runs under work, not ctx: a claim cut short by SIGTERM
		// could still commit on the server, leaving its rows leased to no
		// one. Claimed rows are always started; if the worker is stopping
		// by then, they are released at once.
		q := d.query(limit)
		began := time.Now()
		b, err := d.store.Claim(work, q)
		d.m.claimDuration.Observe(time.Since(began).Seconds())
		d.lastClaim = d.cfg.Now()
		d.sweep.Reset(d.cfg.SweepInterval)
		if err != nil {
			d.backlog = false
			if ctx.Err() == nil {
				d.m.claimErrors.Inc()
				d.log.Warn("dispatcher: claim failed; trying again", "error", err, "retry_in", claimErrorDelay)
				d.armRecheck(-1, claimErrorDelay)
				d.setBusy(false)
			}
			return
		}
		claims++
		d.flowWait = b.FlowWait > 0
		if b.FlowWait > 0 {
			// An endpoint under flow control had nothing granted: look
			// again when it may have.
			d.armDue(b.FlowWait)
		}
		d.fannedOut(b)
		if b.Taken == 0 {
			d.backlog, d.capped = false, d.cappedBy(q)
			break
		}
		d.claimed(ctx, work, b.Rows)
		claimed += b.Taken + b.Fresh
		// Rows left (a queue gave its whole share, a fan-out made pending
		// deliveries or left events): claim again at once.
		if d.backlog = b.Taken >= q.Limit || b.More; !d.backlog {
			// A queue that gave its whole room has rows left, which its
			// slots take back as they come free (capped): the claim then
			// takes every free slot, as after a full claim.
			filled := filledRoom(q, b.Rows)
			d.capped, d.backlog = d.cappedBy(q) || filled, filled
			break
		}
	}
	d.hushAfter(claimed, claims)
	switch {
	case claimed > 0:
		d.armRecheck(0, recheckDelays[0])
	case recheck && d.step+1 < len(recheckDelays):
		d.armRecheck(d.step+1, recheckDelays[d.step+1])
	case recheck:
		d.step = -1
	}
}

// cooldownLeft is how long until ClaimCooldown has passed since the last
// claim (<= 0: it has).
func (d *Dispatcher) cooldownLeft() time.Duration {
	return d.lastClaim.Add(d.cfg.ClaimCooldown).Sub(d.cfg.Now())
}

// cappedBy says whether claim q skipped, for want of room, an endpoint
// that holds slots of this worker (not one parked by a gate): its rows may
// be waiting for those slots, and the loop claims again as they are given
// back (after ClaimCooldown), not at the next recheck or sweep. Without
// it a backlogged endpoint held at its cap beside others, while other
// slots stayed free, would be claimed for only at the rechecks
// (recheckDelays after the last rows) and the sweep, and drain well below
// its cap's rate.
func (d *Dispatcher) cappedBy(q webhook.Query) bool {
	now := d.cfg.Now()
	holds := func(id string) bool { return d.held[id] > 0 && !d.parkedAt(id, now) }
	if q.SkipEnv && d.cfg.EnvEndpoint && holds("") {
		return true
	}
	return slices.ContainsFunc(q.Skip, holds)
}

// filledRoom says whether claim q took an endpoint's whole room: its rows
// left (it very likely has some) wait for its slots, as those of an
// endpoint cappedBy finds skipped do. Without it an endpoint whose room a
// claim filled (its limit held lower beside another that wants slots)
// would be claimed for only at the next recheck, due time or sweep, its
// slots idle meanwhile.
func filledRoom(q webhook.Query, rows []webhook.Delivery) bool {
	took := map[string]int{}
	for _, r := range rows {
		took[r.EndpointID]++
	}
	for id, n := range took {
		room, ok := q.Room[id]
		switch {
		case id == "":
			room = cmp.Or(q.EnvRoom, q.Limit)
		case !ok:
			room = q.DefaultRoom
		}
		if n >= room {
			return true
		}
	}
	return false
}

// claimSize is the most rows the next claim takes: BatchSize, the first
// round trip after a quiet moment, which keeps a sparse stream's claims
// short; every free slot while the last claim left rows, so that a backlog
// is leased in as few statements as the slots allow (a claim costs little
// more for 100 rows than for 10: the queues are listed and their heads
// read once either way).
func (d *Dispatcher) claimSize(free int) int {
	if d.backlog {
		return free
	}
	return min(d.cfg.BatchSize, free)
}

// collectFreed counts the slots given back since the loop last looked.
func (d *Dispatcher) collectFreed() {
	for {
		select {
		case s := <-d.freed:
			d.free(s)
		default:
			return
		}
	}
}

// fannedOut counts what a claim fanned out.
func (d *Dispatcher) fannedOut(b webhook.Batch) {
	if b.FannedOut > 0 {
		d.m.fannedOut.Add(float64(b.FannedOut))
	}
	if len(b.Broken) > 0 {
		d.m.undecodable.Add(float64(len(b.Broken)))
		ids := make([]string, len(b.Broken))
		for i, r := range b.Broken {
			ids[i] = r.DeliveryID
		}
		if b.BrokenErr != nil {
			d.log.Error("dispatcher: rows the worker cannot decode could not be dead-lettered; they stay leased until their lease ends",
				"rows", len(b.Broken), "delivery_ids", ids, "error", b.BrokenErr)
		} else {
			d.log.Warn("dispatcher: rows the worker cannot decode moved to the dead letter (their reason is in last_error)",
				"rows", len(b.Broken), "delivery_ids", ids)
		}
	}
	if len(b.Unrouted) > 0 {
		d.m.unrouted.Add(float64(len(b.Unrouted)))
		d.log.Warn("dispatcher: events with no endpoint recorded as unrouted (no WEBHOOK_URL, no enabled endpoint subscribed to their type)",
			"events", len(b.Unrouted), "event_types", uniq(b.Unrouted))
	}
}

func uniq(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// claimed starts a slot for each row. A row whose endpoint has reached its
// cap within this batch (the claim keeps to each endpoint's room, so only
// when another worker's rows or a race made it so) is given back at once,
// unattempted.
func (d *Dispatcher) claimed(ctx, work context.Context, rows []webhook.Delivery) {
	if len(rows) == 0 {
		return
	}
	d.m.batches.Inc()
	d.m.rows.Add(float64(len(rows)))
	d.m.inFlight.Add(float64(len(rows)))
	reclaimed, now := 0, d.cfg.Now()
	for _, r := range rows {
		d.active[r.EndpointID] = now
	}
	active := d.activeCount()
	for _, r := range rows {
		if r.Reclaimed {
			reclaimed++
		}
		over := d.held[r.EndpointID] >= d.capOf(r.EndpointID, active)
		d.start(ctx, work, r, over)
	}
	if reclaimed > 0 {
		d.m.reclaimed.Add(float64(reclaimed))
		d.log.Warn("dispatcher: took over rows whose lease had expired (their worker died, froze or lost the database)",
			"rows", reclaimed)
	}
}

// hushAfter tells the hush whether the worker is busy: rows keep coming
// (this drain found rows, and so did one less than busyGap ago), so the
// worker will claim again within recheckDelays[0] (or as soon as a slot
// frees) whatever producers do, and their NOTIFYs are only cost. A lone
// event on a sparse stream does not count. An empty claim ends it. A busy
// worker that is also saturated asks the hush to wake the other workers.
func (d *Dispatcher) hushAfter(claimed, claims int) {
	switch {
	case claimed > 0:
		now := d.cfg.Now()
		if now.Sub(d.lastRows) < busyGap || claims > 1 {
			d.setBusy(true)
		}
		d.lastRows = now
	case !d.starved:
		d.setBusy(false)
	}
	if d.starved && d.busy {
		d.hush.Help()
	}
}

func (d *Dispatcher) setBusy(busy bool) {
	// Busy is repeated: a hold that lost to a notifying producer is tried
	// again.
	if busy || busy != d.busy {
		d.busy = busy
		d.hush.Set(busy)
	}
}

func (d *Dispatcher) armRecheck(step int, after time.Duration) {
	d.step = step
	d.recheck.Reset(after)
}

// armDue makes sure the loop wakes within after, when the next scheduled row
// falls due.
func (d *Dispatcher) armDue(after time.Duration) {
	at := d.cfg.Now().Add(after)
	if !d.dueAt.IsZero() && !at.Before(d.dueAt) {
		return
	}
	d.dueAt = at
	d.due.Reset(after)
}

func (d *Dispatcher) refreshNextDue(ctx context.Context) {
	after, ok, err := d.store.NextDue(ctx)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("dispatcher: reading the next due time failed", "error", err)
		}
		return
	}
	if ok {
		d.armDue(after)
	}
}
