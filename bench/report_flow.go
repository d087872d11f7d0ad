package main

import (
	"fmt"
	"text/tabwriter"
)

// flowDrainMin is the flow mode's target: with the rate set, the drain is
// within 5% of the API's rate, and the API refuses nothing.
const flowDrainMin = 0.95 * flowLimit

// writeFlow prints the flow section (worker only).
func writeFlow(tw *tabwriter.Writer, rep *report) {
	if !has(rep, func(s SystemResult) bool { return s.Flow != nil }) {
		return
	}
	section(tw, fmt.Sprintf("FLOW  one endpoint in front of an API allowing %d requests/s (bucket of %d; 429 and Retry-After: 1 beyond); "+
		"its deliveries pending when the worker starts; drained with the endpoint's --rate %d/s --burst %d, then without a rate for %.1fx as long "+
		"(worker only: River has no endpoints)", flowLimit, flowLimitBurst, flowRate, flowBurst, flowBudget),
		"system\trun\tpending\tbudget s\tdelivered\tdeliveries/s\tbusiest second\t429s (attempts spent)\tdead-lettered\tduplicates")
	for _, s := range rep.Systems {
		f := s.Flow
		if f == nil {
			continue
		}
		for _, r := range []struct {
			name string
			run  FlowRun
		}{{fmt.Sprintf("--rate %d/s --burst %d", f.Rate, f.Burst), f.RateSet}, {"no rate", f.NoRate}} {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%.1f\t%d\t%d\t%d\t%d\n", s.Name, r.name, f.Events, secs(r.run.Budget),
				r.run.Delivered, r.run.PerSecond, r.run.Busiest, r.run.Refused, r.run.DeadLettered, r.run.Duplicates)
		}
	}
}

// flowTargets: with the rate set, every delivery made, none refused, and
// the drain at least flowDrainMin.
func flowTargets(systems []SystemResult) []Target {
	var out []Target
	for _, s := range systems {
		f := s.Flow
		if f == nil {
			continue
		}
		r := f.RateSet
		out = append(out, Target{Name: fmt.Sprintf("flow with the rate set: 0 refused, all delivered, >= %.0f/s", flowDrainMin), System: s.Name,
			Value: fmt.Sprintf("%d refused, %d of %d delivered, %.1f/s", r.Refused, r.Delivered, f.Events, r.PerSecond),
			Pass:  r.Refused == 0 && r.Delivered == f.Events && r.PerSecond >= flowDrainMin})
	}
	return out
}

// flowFigures are the flow mode's rows of the medians' tables.
func flowFigures() []figure {
	const g = "Flow control"
	flow := func(get func(*FlowResult) float64) func(SystemResult) (float64, bool) {
		return func(s SystemResult) (float64, bool) { return ptrF(s.Flow, get) }
	}
	return []figure{
		{g, "flow, rate set: deliveries/s", false, fmtRate, flow(func(f *FlowResult) float64 { return f.RateSet.PerSecond })},
		{g, "flow, rate set: 429s", false, fmtRate, flow(func(f *FlowResult) float64 { return float64(f.RateSet.Refused) })},
		{g, "flow, rate set: busiest second", false, fmtRate, flow(func(f *FlowResult) float64 { return float64(f.RateSet.Busiest) })},
		{g, "flow, no rate: deliveries/s", false, fmtRate, flow(func(f *FlowResult) float64 { return f.NoRate.PerSecond })},
		{g, "flow, no rate: 429s (attempts spent)", false, fmtRate, flow(func(f *FlowResult) float64 { return float64(f.NoRate.Refused) })},
		{g, "flow, no rate: delivered in its budget", false, fmtRate, flow(func(f *FlowResult) float64 { return float64(f.NoRate.Delivered) })},
	}
}
