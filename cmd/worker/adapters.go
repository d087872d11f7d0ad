package main

import (
	"context"

	"github.com/fluxora/webhook-worker/dispatcher"
	"github.com/fluxora/webhook-worker/endpoints"
	"github.com/fluxora/webhook-worker/gates"
	"github.com/fluxora/webhook-worker/outbox"
	"github.com/fluxora/webhook-worker/sender"
	"github.com/fluxora/webhook-worker/webhook"
)

// The dispatcher declares what it needs; these adapters hand it the leaf
// packages, which do not know one another.
var (
	_ dispatcher.Store  = (*outbox.Store)(nil)
	_ dispatcher.Sender = (*sender.PerEndpoint)(nil)
	_ dispatcher.Gate   = endpointGate{}
)

// endpointGate is the gates as the dispatcher's Gate: keyed by each row's
// endpoint URL, with the endpoint's own retry limit when it has one.
type endpointGate struct {
	g      *gates.Gates
	envURL string
}

func (e endpointGate) url(r webhook.Delivery) string {
	if r.EndpointID == "" {
		return e.envURL
	}
	return r.URL
}

func (e endpointGate) Check(ctx context.Context, r webhook.Delivery) dispatcher.Decision {
	d := e.g.CheckLimit(ctx, e.url(r), r.Attempt, r.RetryRPS)
	return dispatcher.Decision{Allow: d.Allow, DeferFor: d.DeferFor, Probe: d.Probe}
}

func (e endpointGate) Record(ctx context.Context, r webhook.Delivery, class webhook.Class, probe bool) {
	e.g.Record(ctx, e.url(r), class, probe)
}

// goneDisabler disables an endpoint that answered 410 Gone.
type goneDisabler struct{ s *endpoints.Store }

func (g goneDisabler) Disable(ctx context.Context, id, reason string) (int64, error) {
	return g.s.Disable(ctx, id, endpoints.Gone, reason)
}
