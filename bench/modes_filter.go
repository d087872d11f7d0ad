package main

import (
	"context"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"
)

// modeFanoutFilter measures what payload filters cost the fan-out: the
// drain of the same backlog of events to fanoutFilterWidth endpoints,
// each with a payload filter, beside the same without filters. It runs
// only when -modes names it (worker systems only: River has no endpoints).
//
// Three variants: plain (subscribed to every type, no filter), filtered
// (every type, and the filter) and typed (subscribed to the one type the
// events have, no filter). filtered/plain is what adding a filter costs
// an endpoint of every type; filtered/typed the filter's evaluation alone:
// the claim sizes the events it locks by the endpoints sure to take every
// event (every type, no filter), so that a filtered endpoint is sized as
// a typed one is.
const modeFanoutFilter = "fanout-filter"

const (
	fanoutFilterWidth = 10 // endpoints, each subscribed to every type
	// fanoutFilterExpr is every endpoint's filter in the filtered runs: it
	// matches every event (each carries an amount from 0 to 999), so both
	// variants deliver the same, but the database evaluates it for each
	// event and endpoint.
	fanoutFilterExpr = `$.amount ? (@ >= 0)`
	// fanoutFilterSeq is the first seq of a run's events.
	fanoutFilterSeq = int64(1) << 41
)

// FanoutFilterResult is fanout-filter's outcome: -fanout-filter-rounds
// rounds of each variant, the order of the variants rotating from round
// to round, so that drift over the minutes weighs on each alike.
type FanoutFilterResult struct {
	Endpoints int    `json:"endpoints"`
	Events    int    `json:"events"` // per run; each to every endpoint
	Filter    string `json:"filter"`
	// Plain, Filtered and Typed are the drains of each run, in order.
	Plain    []ScaleDrain `json:"plain"`
	Filtered []ScaleDrain `json:"filtered"`
	Typed    []ScaleDrain `json:"typed"`
	// Ratio is the median over the rounds of filtered deliveries/s over
	// plain deliveries/s (1: filters cost nothing; below 1: slower);
	// TypedRatio of filtered over typed.
	Ratio      float64 `json:"filtered_to_plain_drain"`
	TypedRatio float64 `json:"filtered_to_typed_drain"`
	// Over every run: deliveries of an already delivered (endpoint,
	// event), bad signatures, requests naming another endpoint.
	Duplicates    int   `json:"duplicates"`
	BadSignatures int64 `json:"bad_signatures"`
	Misrouted     int64 `json:"misrouted"`
}

// The variants of fanout-filter.
const (
	variantPlain    = "plain"
	variantFiltered = "filtered"
	variantTyped    = "typed"
)

// fanoutFilter runs -fanout-filter-rounds rounds of drains of
// -fanout-filter-events events, each fanned out to fanoutFilterWidth
// endpoints, once in each variant.
func (r *runner) fanoutFilter(ctx context.Context) (*FanoutFilterResult, error) {
	names := make([]string, fanoutFilterWidth)
	for i := range names {
		names[i] = fmt.Sprintf("filt-%02d", i)
	}
	tally := &ScaleResult{}
	s := scaler{runner: r, sc: tally}
	out := &FanoutFilterResult{Endpoints: len(names), Events: r.opt.fanoutFilterEvents, Filter: fanoutFilterExpr}
	var ratios, typedRatios []float64
	variants := []string{variantPlain, variantFiltered, variantTyped}
	err := s.withEndpoints(ctx, names, true, nil, func(cons *endpointConsumer, _ map[string]string) error {
		for round := range r.opt.fanoutFilterRounds {
			got := map[string]ScaleDrain{}
			for k := range variants {
				v := variants[(round+k)%len(variants)]
				d, err := s.filterRun(ctx, cons, names, out.Events, v)
				if err != nil {
					return fmt.Errorf("round %d, %s: %w", round+1, v, err)
				}
				got[v] = d
			}
			out.Plain, out.Filtered, out.Typed = append(out.Plain, got[variantPlain]), append(out.Filtered, got[variantFiltered]),
				append(out.Typed, got[variantTyped])
			if p := got[variantPlain].PerSecond; p > 0 {
				ratios = append(ratios, got[variantFiltered].PerSecond/p)
			}
			if t := got[variantTyped].PerSecond; t > 0 {
				typedRatios = append(typedRatios, got[variantFiltered].PerSecond/t)
			}
		}
		return nil
	})
	out.Ratio, out.TypedRatio = median(ratios), median(typedRatios)
	out.Duplicates, out.BadSignatures, out.Misrouted = tally.Duplicates, tally.BadSignatures, tally.Misrouted
	return out, err
}

// filterRun empties the outbox, sets every endpoint's subscription and
// filter as variant says, inserts n events carrying an amount and drains
// them on a fresh worker.
func (s scaler) filterRun(ctx context.Context, cons *endpointConsumer, names []string, n int, variant string) (ScaleDrain, error) {
	if err := s.sys.reset(ctx); err != nil {
		return ScaleDrain{}, fmt.Errorf("reset: %w", err)
	}
	var filter any // NULL: no filter
	types := []string{}
	switch variant {
	case variantFiltered:
		filter = fanoutFilterExpr
	case variantTyped:
		types = []string{"bench.event"}
	}
	if _, err := s.pool.Exec(ctx, "UPDATE webhook_endpoints SET payload_filter = $1::jsonpath, event_types = $2", filter, types); err != nil {
		return ScaleDrain{}, fmt.Errorf("set filters: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload)
		SELECT 'bench.event', jsonb_build_object('seq', $1::bigint + g, 't', $2::bigint, 'amount', g % 1000,
		       'customer', jsonb_build_object('id', 'cus_' || g % 97))
		FROM generate_series(0, $3::bigint - 1) AS g`, fanoutFilterSeq, time.Now().UnixNano(), n); err != nil {
		return ScaleDrain{}, fmt.Errorf("insert events: %w", err)
	}
	if err := s.analyze(ctx, false); err != nil {
		return ScaleDrain{}, err
	}
	d, _, err := s.drain(ctx, cons, names, n, fanoutFilterSeq, nil)
	return d, err
}

// writeFanoutFilter prints the FANOUT-FILTER section: each system's runs
// of both variants and the ratio.
func writeFanoutFilter(tw *tabwriter.Writer, rep *report) {
	if !has(rep, func(s SystemResult) bool { return s.FanoutFilter != nil }) {
		return
	}
	section(tw, fmt.Sprintf("FANOUT-FILTER  events inserted first, each fanned out to %d endpoints subscribed to every type, with every endpoint's "+
		"payload filter %s (matches every event; filtered), without (plain), or subscribed to the events' one type without (typed); "+
		"process start -> last receipt, deliveries/s; the variants' order rotates from round to round (worker only: River has no endpoints)",
		fanoutFilterWidth, fanoutFilterExpr),
		"system\tevents\tendpoints\tplain deliveries/s (each run)\tfiltered\ttyped\tfiltered/plain (median)\tfiltered/typed (median)\tmissing\t"+
			"dups / bad sigs / misrouted")
	for _, s := range rep.Systems {
		f := s.FanoutFilter
		if f == nil {
			continue
		}
		missing := 0
		for _, d := range slices.Concat(f.Plain, f.Filtered, f.Typed) {
			missing += d.Missing
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%.2fx\t%.2fx\t%d\t%d / %d / %d\n", s.Name, f.Events, f.Endpoints, drainRates(f.Plain),
			drainRates(f.Filtered), drainRates(f.Typed), f.Ratio, f.TypedRatio, missing, f.Duplicates, f.BadSignatures, f.Misrouted)
	}
}

// drainRates lists the runs' deliveries/s.
func drainRates(ds []ScaleDrain) string {
	out := ""
	for i, d := range ds {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%.0f", d.PerSecond)
	}
	return out
}
