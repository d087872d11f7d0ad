package main

import (
	"github.com/fluxora/webhook-worker/endpoints"
	"github.com/fluxora/webhook-worker/webhook"
)

// envFlow reads the WEBHOOK_URL endpoint's flow control, held across
// every worker like an endpoint's (docs/endpoints.md, "Flow control"):
// WEBHOOK_RATE (N/s or N/m), WEBHOOK_RATE_BURST and WEBHOOK_MAX_IN_FLIGHT.
// Every worker with a WEBHOOK_URL endpoint should set the same values: a
// claim applies its own worker's.
func (e *env) envFlow() webhook.Flow {
	var f webhook.Flow
	if v := e.getenv("WEBHOOK_RATE"); v != "" {
		n, per, err := endpoints.ParseRate(v)
		if err != nil {
			e.fail("WEBHOOK_RATE", "%v", err)
		}
		f.Rate, f.Per = n, per
	}
	f.Burst = e.int("WEBHOOK_RATE_BURST", 0, 0, endpoints.BurstMax)
	if f.Burst > 0 && f.Rate == 0 {
		e.fail("WEBHOOK_RATE_BURST", "needs WEBHOOK_RATE")
	}
	f.MaxInFlight = e.int("WEBHOOK_MAX_IN_FLIGHT", 0, 0, endpoints.MaxInFlightMax)
	return f
}
