package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// The flow mode (worker only): one endpoint in front of an API that
// enforces flowLimit requests a second (apiLimit: 429 and Retry-After: 1
// beyond), -flow-events deliveries pending for it when the worker starts.
// Drained twice: with the endpoint's rate set at the API's rate
// (flowRate/s, burst flowBurst), then without a rate, for as long as the
// first run took times flowBudget, so that the two are side by side: what
// a rate costs and what its absence burns.
const (
	modeFlow       = "flow"
	flowEndpoint   = "api"
	flowLimit      = 100 // the API's requests a second
	flowLimitBurst = 20  // and its bucket
	flowRate       = 100 // the endpoint's --rate N/s in the first run
	flowBurst      = 10  // its --burst
	flowBudget     = 1.5 // the second run's time, × the first's
)

// FlowResult is the flow mode's outcome.
type FlowResult struct {
	Events     int `json:"events"`
	Limit      int `json:"api_limit_per_second"`
	LimitBurst int `json:"api_limit_burst"`
	Rate       int `json:"rate_per_second"`
	Burst      int `json:"rate_burst"`
	// RateSet is the drain with the endpoint's rate set, NoRate the same
	// without it.
	RateSet FlowRun `json:"rate_set"`
	NoRate  FlowRun `json:"no_rate"`
}

// FlowRun is one of the flow mode's runs.
type FlowRun struct {
	Budget time.Duration `json:"budget_ns"` // how long the run could take
	// Delivered are the deliveries answered 200 by the end of the run;
	// Elapsed runs from the first of them to the last, PerSecond is
	// (Delivered − 1) / Elapsed.
	Delivered int           `json:"delivered"`
	Elapsed   time.Duration `json:"elapsed_ns"`
	PerSecond float64       `json:"deliveries_per_second"`
	// Refused are the requests the API answered 429: each an attempt the
	// row spent. DeadLettered are the rows that ran out of attempts.
	Refused      int   `json:"refused_429"`
	DeadLettered int64 `json:"dead_lettered"`
	// Busiest is the most deliveries the API answered 200 in any second.
	Busiest    int `json:"busiest_second"`
	Duplicates int `json:"duplicates"`
}

// flow runs the flow mode's two runs on one worker system.
func (r *runner) flow(ctx context.Context) (*FlowResult, error) {
	r.cons.reset(0, profileInstant) // as in noisy: the single consumer gets nothing here
	s := scaler{runner: r, sc: &ScaleResult{}}
	out := &FlowResult{Events: r.opt.flowEvents, Limit: flowLimit, LimitBurst: flowLimitBurst, Rate: flowRate, Burst: flowBurst}
	budget := time.Minute + time.Duration(float64(out.Events)/flowRate*1.2*float64(time.Second))
	var err error
	if out.RateSet, err = s.flowRun(ctx, true, budget); err != nil {
		return out, fmt.Errorf("rate set: %w", err)
	}
	if out.RateSet.Delivered > 0 {
		budget = time.Duration(float64(out.RateSet.Elapsed) * flowBudget)
	}
	if out.NoRate, err = s.flowRun(ctx, false, budget); err != nil {
		return out, fmt.Errorf("no rate: %w", err)
	}
	return out, nil
}

// flowRun drains the flow mode's deliveries once, for at most budget: the
// endpoint's rate set at flowRate (burst flowBurst) when rated.
func (s scaler) flowRun(ctx context.Context, rated bool, budget time.Duration) (FlowRun, error) {
	out := FlowRun{Budget: budget}
	n := s.opt.flowEvents
	err := s.withEndpoints(ctx, []string{flowEndpoint}, false, nil, func(cons *endpointConsumer, ids map[string]string) error {
		cons.limit(flowEndpoint, apiLimit{rate: flowLimit, burst: flowLimitBurst})
		id := ids[flowEndpoint]
		if rated {
			if _, err := s.pool.Exec(ctx, `UPDATE webhook_endpoints SET rate_limit = $1, rate_period_s = 1, rate_burst = $2 WHERE id = $3`,
				flowRate, flowBurst, id); err != nil {
				return fmt.Errorf("set the rate: %w", err)
			}
		}
		if err := s.insertQueue(ctx, id, 0, n, 0); err != nil {
			return err
		}
		cons.reset(0, nil)
		cons.count([]string{flowEndpoint})
		p, err := s.sys.start(ctx, scaleEnv)
		if err != nil {
			return err
		}
		defer p.Stop()
		if err := cons.await(ctx, n, budget); err != nil && !errors.Is(err, errMissing) {
			return err
		}
		snap := cons.snapshot()
		out.measure(snap)
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_dead_letter WHERE endpoint_id = $1`, id).Scan(&out.DeadLettered); err != nil {
			return fmt.Errorf("count dead letters: %w", err)
		}
		return p.Stop()
	})
	return out, err
}

// measure fills in a flow run's figures from its record.
func (out *FlowRun) measure(snap endpointSnapshot) {
	times := make([]time.Time, 0, len(snap.got[flowEndpoint]))
	for _, at := range snap.got[flowEndpoint] {
		times = append(times, at)
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	out.Delivered, out.Refused, out.Duplicates = len(times), snap.refused[flowEndpoint], snap.dups
	out.Busiest = busiest(times, time.Second)
	if len(times) > 1 {
		out.Elapsed = times[len(times)-1].Sub(times[0])
		out.PerSecond = perSecond(len(times)-1, out.Elapsed)
	}
}
