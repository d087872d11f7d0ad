package main

import (
	"context"
	"time"

	"github.com/fluxora/webhook-worker/claimer"
	"github.com/fluxora/webhook-worker/dispatcher"
	"github.com/fluxora/webhook-worker/endpoints"
	"github.com/fluxora/webhook-worker/gates"
	"github.com/fluxora/webhook-worker/sender"
)

// The dispatcher declares what it needs; these adapters hand it the leaf
// packages, which do not know one another.
var (
	_ dispatcher.Store  = store{}
	_ dispatcher.Sender = (*sender.PerEndpoint)(nil)
	_ dispatcher.Gate   = endpointGate{}
)

// store is the claimer as the dispatcher's Store.
type store struct{ c *claimer.Claimer }

func (s store) Claim(ctx context.Context, q dispatcher.Query) (dispatcher.Batch, error) {
	b, err := s.c.Claim(ctx, claimer.Query(q))
	out := dispatcher.Batch{Rows: b.Rows, Taken: b.Taken, More: b.More, FannedOut: b.FannedOut, Deliveries: b.Deliveries,
		Fresh: b.Fresh, Unrouted: b.Unrouted, BrokenErr: b.BrokenErr}
	for _, r := range b.Broken {
		out.Broken = append(out.Broken, r.DeliveryID)
	}
	return out, err
}

func (s store) Record(ctx context.Context, outcomes []dispatcher.Outcome) ([]bool, error) {
	return s.c.Record(ctx, outcomes)
}

func (s store) NextDue(ctx context.Context) (d time.Duration, ok bool, err error) {
	return s.c.NextDue(ctx)
}

// endpointGate is the gates as the dispatcher's Gate: keyed by each row's
// endpoint URL, with the endpoint's own retry limit when it has one.
type endpointGate struct {
	g      *gates.Gates
	envURL string
}

func (e endpointGate) url(r dispatcher.Row) string {
	if r.EndpointID == "" {
		return e.envURL
	}
	return r.URL
}

func (e endpointGate) Check(ctx context.Context, r dispatcher.Row) dispatcher.Decision {
	d := e.g.CheckLimit(ctx, e.url(r), r.Attempt, r.RetryRPS)
	return dispatcher.Decision{Allow: d.Allow, DeferFor: d.DeferFor, Probe: d.Probe}
}

func (e endpointGate) Record(ctx context.Context, r dispatcher.Row, class dispatcher.Class, probe bool) {
	e.g.Record(ctx, e.url(r), class, probe)
}

// goneDisabler disables an endpoint that answered 410 Gone.
type goneDisabler struct{ s *endpoints.Store }

func (g goneDisabler) Disable(ctx context.Context, id, reason string) (int64, error) {
	return g.s.Disable(ctx, id, endpoints.Gone, reason)
}
