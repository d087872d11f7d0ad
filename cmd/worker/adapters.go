package main

import (
	"context"
	"time"

	"github.com/fluxora/webhook-worker/claimer"
	"github.com/fluxora/webhook-worker/dispatcher"
	"github.com/fluxora/webhook-worker/gates"
	"github.com/fluxora/webhook-worker/sender"
)

// The dispatcher declares what it needs; these adapters hand it the leaf
// packages, which do not know one another.
var (
	_ dispatcher.Store  = store{}
	_ dispatcher.Sender = httpSender{}
	_ dispatcher.Gate   = consumerGate{}
)

// store is the claimer as the dispatcher's Store.
type store struct{ c *claimer.Claimer }

func (s store) Claim(ctx context.Context, limit int) ([]dispatcher.Row, error) {
	rows, err := s.c.Claim(ctx, limit)
	out := make([]dispatcher.Row, len(rows))
	for i, r := range rows {
		out[i] = dispatcher.Row(r)
	}
	return out, err
}

func (s store) Record(ctx context.Context, outcomes []dispatcher.Outcome) ([]bool, error) {
	in := make([]claimer.Outcome, len(outcomes))
	for i, o := range outcomes {
		in[i] = claimer.Outcome{ID: o.ID, Token: o.Token, Kind: claimer.Kind(o.Kind),
			Attempt: o.Attempt, Delay: o.Delay, Status: o.Status, Error: o.Error}
	}
	return s.c.Record(ctx, in)
}

func (s store) NextDue(ctx context.Context) (d time.Duration, ok bool, err error) {
	return s.c.NextDue(ctx)
}

// httpSender is the sender as the dispatcher's Sender.
type httpSender struct{ s *sender.Sender }

func (h httpSender) Send(ctx context.Context, r dispatcher.Row) dispatcher.Result {
	res := h.s.Send(ctx, sender.Request{DeliveryID: r.DeliveryID, EventType: r.EventType, Attempt: r.Attempt, Payload: r.Payload})
	class := dispatcher.Permanent
	switch res.Outcome {
	case sender.Delivered:
		class = dispatcher.Delivered
	case sender.Retryable:
		class = dispatcher.Retryable
	}
	return dispatcher.Result{Class: class, Status: res.Status, Error: res.Error, RetryAfter: res.RetryAfter, Duration: res.Duration}
}

// consumerGate is the gates of one consumer URL as the dispatcher's Gate.
type consumerGate struct {
	g   *gates.Gates
	url string
}

func (c consumerGate) Check(ctx context.Context, attempt int) dispatcher.Decision {
	d := c.g.Check(ctx, c.url, attempt)
	return dispatcher.Decision{Allow: d.Allow, DeferFor: d.DeferFor, Probe: d.Probe}
}

func (c consumerGate) Record(ctx context.Context, class dispatcher.Class, probe bool) {
	o := gates.PermanentFailure
	switch class {
	case dispatcher.Delivered:
		o = gates.Success
	case dispatcher.Retryable:
		o = gates.RetryableFailure
	}
	c.g.Record(ctx, c.url, o, probe)
}
