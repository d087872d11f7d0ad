package dispatcher

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/fluxora/webhook-worker/webhook"
)

// deliver makes one attempt at a row (unless a gate defers it, or the
// worker is stopping and has not started it) and decides what becomes of
// it. stop ends at SIGTERM; work bounds the attempt and outlives stop by
// the shutdown timeout.
func (d *Dispatcher) deliver(stop, work context.Context, r webhook.Delivery) webhook.Outcome {
	if r.EndpointID != "" && !r.Enabled {
		// Disabled after the row was made: dead-lettered with the reason,
		// so that enabling the endpoint and replaying recovers it.
		return webhook.Outcome{ID: r.ID, Token: r.Token, Kind: webhook.Dead, Attempt: r.Attempt - 1,
			Error: fmt.Sprintf("endpoint %s disabled: %s", r.EndpointName, r.DisabledReason)}
	}
	dec, ok := d.check(stop, r)
	if !ok {
		return release(r)
	}
	if !dec.Allow {
		return webhook.Outcome{ID: r.ID, Token: r.Token, Kind: webhook.Defer, Attempt: r.Attempt, Delay: deferDelay(dec.DeferFor, d.cfg.DeferMax)}
	}
	started := d.cfg.Now()
	res := d.sender.Send(work, r)
	if work.Err() != nil {
		// Cut short by the shutdown timeout: it says nothing of the consumer,
		// and the next worker takes the row at once.
		return release(r)
	}
	if res.Class == webhook.NotAttempted {
		// Nothing was sent: the row itself moves later, as a gate's
		// deferral moves it (no attempt spent, nothing said of the
		// consumer to the breaker), until the worker can send it.
		d.log.Debug("dispatcher: not attempted; deferred", "delivery_id", r.DeliveryID, "endpoint", d.label(r), "error", res.Error)
		return webhook.Outcome{ID: r.ID, Token: r.Token, Kind: webhook.Defer, Attempt: r.Attempt, Delay: notAttemptedDelay(res.RetryAfter, d.cfg.BackoffMax)}
	}
	d.gate.Record(work, r, res.Class, dec.Probe)
	d.m.attempt(d.label(r), res)
	o := d.decide(r, res)
	o.Started, o.Took, o.AttemptError = started, res.Duration, res.Error
	if res.Class != webhook.Delivered {
		o.AttemptClass = res.Class.String()
	}
	d.logAttempt(r, res, o)
	if res.Status == http.StatusGone && r.EndpointID != "" {
		d.gone(work, r)
	}
	return o
}

// gone disables an endpoint that answered 410 Gone: its pending deliveries
// move to the dead-letter table, to be replayed once it is enabled again.
func (d *Dispatcher) gone(ctx context.Context, r webhook.Delivery) {
	if d.off == nil {
		return
	}
	moved, err := d.off.Disable(ctx, r.EndpointID, "410 Gone")
	if err != nil {
		d.log.Error("dispatcher: endpoint answered 410 Gone; disabling it failed", "endpoint", r.EndpointName, "error", err)
		return
	}
	d.log.Warn("dispatcher: endpoint answered 410 Gone; disabled, its pending deliveries dead-lettered",
		"endpoint", r.EndpointName, "dead_lettered", moved)
}

// label is the endpoint metric label of r.
func (d *Dispatcher) label(r webhook.Delivery) string {
	if r.EndpointID == "" {
		return DefaultEndpointName
	}
	return r.EndpointName
}

// check asks the gate about an attempt; ok is false when the worker is
// stopping, before or during the check: the row is then released, not
// attempted. A check stuck on a frozen Redis is not waited for (its call
// ends by the gate's own timeout, or when the client is closed).
func (d *Dispatcher) check(stop context.Context, r webhook.Delivery) (dec Decision, ok bool) {
	if stop.Err() != nil {
		return dec, false
	}
	if _, open := d.gate.(openGate); open {
		return Decision{Allow: true}, true
	}
	return d.checkGate(stop, r)
}

// checkGate is check's call of a real gate, on a goroutine of its own; a
// function apart, so that a row checked by no gate is not copied to the
// heap for it (a row a delivery).
func (d *Dispatcher) checkGate(stop context.Context, r webhook.Delivery) (dec Decision, ok bool) {
	verdict := make(chan Decision, 1)
	go func() { verdict <- d.gate.Check(stop, r) }()
	select {
	case dec = <-verdict:
		return dec, stop.Err() == nil
	case <-stop.Done():
		return dec, false
	}
}

// deferDelay is a gate's deferral taken within [1ms, ceiling], so that no
// value a gate returns (read from Redis) spins a row (negative, zero) or
// parks it for ages (huge, wrapped).
func deferDelay(d, ceiling time.Duration) time.Duration {
	return min(max(d, time.Millisecond), ceiling)
}

// NotAttemptedDelay is how long a row the sender did not attempt
// (NotAttempted) waits before it is tried again, unless the sender says
// (Result.RetryAfter) or Config.BackoffMax is shorter: long enough that an
// endpoint's rows, deferred together and its slots parked meanwhile, cost
// a claim and a write each a minute, short enough that a fix (the key
// file, a worker restarted) is seen soon.
const NotAttemptedDelay = time.Minute

// notAttemptedDelay is the deferral of a row not attempted: the sender's,
// else NotAttemptedDelay, never over ceiling nor under a millisecond.
func notAttemptedDelay(asked, ceiling time.Duration) time.Duration {
	if asked <= 0 {
		asked = NotAttemptedDelay
	}
	return deferDelay(asked, ceiling)
}

func release(r webhook.Delivery) webhook.Outcome {
	return webhook.Outcome{ID: r.ID, Token: r.Token, Kind: webhook.Release}
}

func (d *Dispatcher) decide(r webhook.Delivery, res webhook.Result) webhook.Outcome {
	o := webhook.Outcome{ID: r.ID, Token: r.Token, Health: webhook.Failing, Status: res.Status, Error: res.Error}
	switch {
	case res.Class == webhook.Delivered:
		o.Kind, o.Health = webhook.Done, webhook.Healthy
	case res.Class == webhook.Permanent:
		o.Kind, o.Attempt, o.Status, o.Error = webhook.Dead, r.Attempt, res.Status, res.Error
	case r.Attempt >= d.cfg.MaxAttempts:
		o.Kind, o.Attempt, o.Status = webhook.Dead, r.Attempt, res.Status
		o.Error = fmt.Sprintf("gave up after %d attempts: %s", r.Attempt, res.Error)
	default:
		o.Kind, o.Attempt = webhook.Retry, r.Attempt+1
		o.Delay = backoff(r.Attempt, d.cfg.BackoffBase, d.cfg.BackoffMax, res.RetryAfter, d.cfg.Rand())
	}
	if (res.Status == http.StatusTooManyRequests || res.Status == http.StatusServiceUnavailable) && res.RetryAfter > 0 {
		// The consumer asked for a pause: every worker holds back the
		// endpoint's deliveries until then, no longer than a retry waits.
		o.Pause = min(res.RetryAfter, d.cfg.BackoffMax)
	}
	return o
}

func (d *Dispatcher) logAttempt(r webhook.Delivery, res webhook.Result, o webhook.Outcome) {
	if o.Kind == webhook.Done && !d.log.Enabled(context.Background(), slog.LevelDebug) {
		return // a drain's every delivery: no attributes built for nothing
	}
	attrs := []any{"delivery_id", r.DeliveryID, "event", r.EventType, "endpoint", d.label(r), "attempt", r.Attempt,
		"status", res.Status, "duration_ms", res.Duration.Milliseconds()}
	switch o.Kind {
	case webhook.Done:
		d.log.Debug("dispatcher: delivered", attrs...)
	case webhook.Retry:
		d.log.Warn("dispatcher: attempt failed; retry scheduled",
			append(attrs, "error", res.Error, "retry_in", o.Delay.String())...)
	case webhook.Dead:
		d.log.Error("dispatcher: dead-lettered", append(attrs, "error", o.Error)...)
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
