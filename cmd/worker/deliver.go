package main

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxora/webhook-worker/claimer"
	"github.com/fluxora/webhook-worker/gates"
	"github.com/fluxora/webhook-worker/sender"
)

// deliver makes one attempt at a row (unless a gate defers it) and decides
// what becomes of it.
func (d *dispatcher) deliver(ctx context.Context, r claimer.Row) claimer.Outcome {
	dec := d.cfg.Gate.Check(ctx, d.cfg.URL, r.Attempt)
	if !dec.Allow {
		return claimer.Outcome{Kind: claimer.Defer, Attempt: r.Attempt, Delay: dec.DeferFor}
	}
	res := d.cfg.Sender.Send(ctx, sender.Request{
		DeliveryID: r.DeliveryID, EventType: r.EventType, Attempt: r.Attempt, Payload: r.Payload,
	})
	if ctx.Err() == nil { // an attempt cut short by our own shutdown says nothing of the consumer
		d.cfg.Gate.Record(ctx, d.cfg.URL, gateOutcome(res.Outcome), dec.Probe)
	}
	d.cfg.Metrics.attempt(res)
	o := d.decide(r, res)
	d.logAttempt(r, res, o)
	return o
}

func (d *dispatcher) decide(r claimer.Row, res sender.Result) claimer.Outcome {
	switch {
	case res.Outcome == sender.Delivered:
		return claimer.Outcome{Kind: claimer.Done}
	case res.Outcome == sender.Permanent:
		return claimer.Outcome{Kind: claimer.Dead, Attempt: r.Attempt, Status: res.Status, Error: res.Error}
	case r.Attempt >= d.cfg.MaxAttempts:
		return claimer.Outcome{Kind: claimer.Dead, Attempt: r.Attempt, Status: res.Status,
			Error: fmt.Sprintf("gave up after %d attempts: %s", r.Attempt, res.Error)}
	default:
		delay := backoff(r.Attempt, d.cfg.BackoffBase, d.cfg.BackoffMax, res.RetryAfter, d.cfg.Rand())
		return claimer.Outcome{Kind: claimer.Retry, Attempt: r.Attempt + 1, Delay: delay}
	}
}

func (d *dispatcher) logAttempt(r claimer.Row, res sender.Result, o claimer.Outcome) {
	attrs := []any{"delivery_id", r.DeliveryID, "event", r.EventType, "attempt", r.Attempt,
		"status", res.Status, "duration_ms", res.Duration.Milliseconds()}
	switch o.Kind {
	case claimer.Done:
		d.cfg.Logger.Debug("dispatcher: delivered", attrs...)
	case claimer.Retry:
		d.cfg.Logger.Warn("dispatcher: attempt failed; retry scheduled",
			append(attrs, "error", res.Error, "retry_in", o.Delay.String())...)
	case claimer.Dead:
		d.cfg.Logger.Error("dispatcher: dead-lettered", append(attrs, "error", o.Error)...)
	}
}

func gateOutcome(o sender.Outcome) gates.Outcome {
	switch o {
	case sender.Delivered:
		return gates.Success
	case sender.Retryable:
		return gates.RetryableFailure
	default:
		return gates.PermanentFailure
	}
}

// backoff is the delay before the attempt after attempt: base doubling per
// attempt, with ±20% jitter (rnd in [0,1)), at least a Retry-After the
// consumer asked for, and never more than ceiling.
func backoff(attempt int, base, ceiling, retryAfter time.Duration, rnd float64) time.Duration {
	d := ceiling
	if shift := attempt - 1; shift < 40 && base<<shift > 0 && base<<shift < ceiling {
		d = base << shift
	}
	d = time.Duration(float64(d) * (0.8 + 0.4*rnd))
	return min(max(d, retryAfter), ceiling)
}
