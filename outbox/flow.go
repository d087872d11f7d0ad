package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxora/webhook-worker/webhook"
)

// endpointFlowsSQL is the statement endpoint_flows (queries/flow.sql).
var endpointFlowsSQL = rawStatement("endpoint_flows")

// EndpointFlow is an endpoint's flow control as the list and the status
// show it.
type EndpointFlow struct {
	webhook.Flow
	// PausedUntil is when its consumer's pause ends; zero: not paused.
	PausedUntil time.Time
}

// flowRowOut is a row of endpoint_flows.
type flowRowOut struct {
	Name        string     `db:"name"`
	RateLimit   int        `db:"rate_limit"`
	RatePeriodS int        `db:"rate_period_s"`
	RateBurst   int        `db:"rate_burst"`
	MaxInFlight int        `db:"max_in_flight"`
	PausedUntil *time.Time `db:"paused_until"`
}

// EndpointFlows returns every endpoint's flow control by name, and the
// WEBHOOK_URL endpoint's pause under "" while one holds.
func (s *Store) EndpointFlows(ctx context.Context) (map[string]EndpointFlow, error) {
	rows, err := queryAll[flowRowOut](ctx, s.pool, endpointFlowsSQL, nil)
	if err != nil {
		return nil, fmt.Errorf("endpoint flows: %w", err)
	}
	out := make(map[string]EndpointFlow, len(rows))
	for _, r := range rows {
		f := EndpointFlow{Flow: webhook.Flow{Rate: r.RateLimit, Per: time.Duration(r.RatePeriodS) * time.Second, Burst: r.RateBurst,
			MaxInFlight: r.MaxInFlight}}
		if r.PausedUntil != nil {
			f.PausedUntil = *r.PausedUntil
		}
		out[r.Name] = f
	}
	return out, nil
}
