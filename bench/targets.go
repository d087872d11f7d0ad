package main

import (
	"fmt"
	"time"
)

// Target is one pass/fail goal, checked for one system.
type Target struct {
	Name   string `json:"name"`
	System string `json:"system"`
	Value  string `json:"value"`
	Pass   bool   `json:"pass"`
}

// The targets' thresholds.
const (
	latencyP50Max   = 2 * time.Millisecond
	latencyP99Max   = 5 * time.Millisecond
	burstRatioMin   = 0.95
	burstP99Max     = 20 * time.Millisecond
	costRatioMin    = 0.90
	retryP99Max     = 50 * time.Millisecond
	peakRSSMax      = 64 << 20
	drainTunedMin   = 1.5 // × river-tuned
	drainDefaultMin = 5.0 // × river-defaults
	tailIdealMin    = 0.8 // × the system's ideal, slots / mean service time
	tailRiverMin    = 1.0 // × river-200's steady rate
	noisyFactorMax  = 2.0 // good endpoints' p99 with the hang, × their baseline p99
	noisyP99Max     = 20 * time.Millisecond
	fanoutP99Max    = 50 * time.Millisecond
	// The scale targets: ratios to the scale baseline of the same run (one
	// endpoint, empty table), and scale-many's bound.
	scaleBacklogP99Max   = 1.5 // healthy's latency p99 beside stuck's backlog, × baseline p99
	scaleBacklogDrainMin = 0.8 // healthy's drain beside it, × baseline drain
	scaleIdleDrainMin    = 0.9
	scaleFanoutMin       = 1.0 // fanned-out deliveries/s, × baseline drain
	scaleManyMax         = 2 * time.Second
	scaleHistoryP99Max   = 1.2
	scaleHistoryDrainMin = 0.8
	// The ordering targets: keyed drain against the same rows
	// unordered, one hot key against its ideal cycle, unordered latency
	// beside blocked keys against the baseline.
	orderKeysMin       = 0.8
	orderHotMin        = 0.8
	orderBlockedP99Max = 1.2
)

// targets checks every goal that the report has the data for; a mode that
// lost events fails its targets.
func targets(rep *report) []Target {
	by := map[string]SystemResult{}
	for _, s := range rep.Systems {
		by[s.Name] = s
	}
	var out []Target
	add := func(name, sys, value string, pass bool) {
		out = append(out, Target{Name: name, System: sys, Value: value, Pass: pass})
	}
	for _, name := range []string{sysWorkerDefaults, sysWorkerTuned} {
		s, ok := by[name]
		if !ok {
			continue
		}
		if l := s.Latency; l != nil {
			add("latency p50 <= 2 ms", name, ms(l.Latency.P50)+" ms", l.Missing == 0 && l.Latency.P50 <= latencyP50Max)
			add("latency p99 <= 5 ms", name, ms(l.Latency.P99)+" ms", l.Missing == 0 && l.Latency.P99 <= latencyP99Max)
			if rt := by[sysRiverTuned].Latency; rt != nil && rt.Latency.N > 0 {
				add("latency p99 <= 1/2 river-tuned p99", name,
					fmt.Sprintf("%s vs %s ms", ms(l.Latency.P99), ms(rt.Latency.P99)),
					l.Missing == 0 && 2*l.Latency.P99 <= rt.Latency.P99)
			}
		}
		if d := s.Drain; d != nil {
			add("drain peak RSS <= 64 MiB", name, fmt.Sprintf("%.1f MiB", float64(d.PeakRSS)/(1<<20)), d.PeakRSS <= peakRSSMax)
		}
		if b := s.Burst; b != nil {
			add("burst delivered/inserted >= 0.95", name, fmt.Sprintf("%.3f", b.Ratio), b.Missing == 0 && b.Ratio >= burstRatioMin)
			add("burst p99 <= 20 ms", name, ms(b.Latency.P99)+" ms", b.Missing == 0 && b.Latency.P99 <= burstP99Max)
		}
		if c := s.Cost; c != nil {
			add("producer cost on/off >= 0.90", name, fmt.Sprintf("%.3f", c.Ratio), c.Ratio >= costRatioMin)
		}
		if r := s.Retry; r != nil {
			add("retry lateness p99 <= 50 ms", name, ms(r.Lateness.P99)+" ms",
				r.Missing == 0 && r.Lateness.N > 0 && r.Lateness.P99 <= retryP99Max)
		}
	}
	out = append(out, drainTargets(by)...)
	out = append(out, tailTargets(by)...)
	out = append(out, endpointTargets(rep.Systems)...)
	out = append(out, flowTargets(rep.Systems)...)
	return append(out, scaleTargets(rep.Systems)...)
}

// scaleTargets checks every scale situation against the baseline of its
// system (the mean of the runs around it, ScaleResult.base): latency p99
// at most, and drain rates at least, a factor of the baseline's. Each
// needs nothing missing, in the baseline too, and no bad signature or
// misrouted request.
func scaleTargets(systems []SystemResult) []Target {
	var out []Target
	for _, s := range systems {
		sc := s.Scale
		if sc == nil || sc.Baseline == nil {
			continue
		}
		clean := sc.BadSignatures+sc.Misrouted == 0
		p99 := func(name string, l ScaleLatency, b *ScaleBaseline, factor float64) {
			out = append(out, Target{Name: fmt.Sprintf("%s latency p99 <= %.1f x baseline", name, factor), System: s.Name,
				Value: fmt.Sprintf("%s vs %s ms (%sx)", ms(l.Latency.P99), ms(b.Latency.Latency.P99),
					ratio(float64(l.Latency.P99), float64(b.Latency.Latency.P99))),
				Pass: clean && l.Missing == 0 && b.Latency.Missing == 0 && l.Latency.N > 0 && b.Latency.Latency.N > 0 &&
					float64(l.Latency.P99) <= factor*float64(b.Latency.Latency.P99)})
		}
		drain := func(name string, d ScaleDrain, b *ScaleBaseline, factor float64) {
			out = append(out, Target{Name: fmt.Sprintf("%s >= %.1f x baseline drain", name, factor), System: s.Name,
				Value: fmt.Sprintf("%.0f vs %.0f/s (%sx)", d.PerSecond, b.Drain.PerSecond, ratio(d.PerSecond, b.Drain.PerSecond)),
				Pass:  clean && d.Missing == 0 && b.Drain.Missing == 0 && b.Drain.PerSecond > 0 && d.PerSecond >= factor*b.Drain.PerSecond})
		}
		if k := sc.Backlog; k != nil {
			p99(modeScaleBacklog, k.Latency, sc.base(modeScaleBacklog), scaleBacklogP99Max)
			drain(modeScaleBacklog+" drain", k.Drain, sc.base(modeScaleBacklog), scaleBacklogDrainMin)
		}
		if k := sc.Limited; k != nil {
			p99(modeScaleLimited, k.Latency, sc.base(modeScaleLimited), scaleBacklogP99Max)
			drain(modeScaleLimited+" drain", k.Drain, sc.base(modeScaleLimited), scaleBacklogDrainMin)
			out = append(out, Target{Name: fmt.Sprintf("%s stuck's busiest second <= %d", modeScaleLimited, scaleLimitedRate), System: s.Name,
				Value: fmt.Sprint(k.StuckBusiest), Pass: k.StuckBusiest <= scaleLimitedRate})
		}
		if d := sc.Idle; d != nil {
			drain(modeScaleIdle+" drain", *d, sc.base(modeScaleIdle), scaleIdleDrainMin)
		}
		if f := sc.Fanout; f != nil {
			drain(modeScaleFanout+" deliveries/s", f.Drain, sc.base(modeScaleFanout), scaleFanoutMin)
		}
		if m := sc.Many; m != nil {
			out = append(out, Target{Name: fmt.Sprintf("%s COMMIT -> last of %d <= %s", modeScaleMany, m.Endpoints, scaleManyMax), System: s.Name,
				Value: ms(m.Warm) + " ms", Pass: clean && m.Missing == 0 && m.Warm <= scaleManyMax})
		}
		if h := sc.History; h != nil {
			b := sc.base(modeScaleHistory)
			p99(modeScaleHistory+" kept", h.KeptLatency, b, scaleHistoryP99Max)
			drain(modeScaleHistory+" expired drain", h.ExpiredDrain, b, scaleHistoryDrainMin)
			p99(modeScaleHistory+" expired", h.ExpiredLatency, b, scaleHistoryP99Max)
		}
		if k := sc.OrderKeys; k != nil {
			out = append(out, Target{Name: fmt.Sprintf("%s drain >= %.1f x unordered", modeOrderKeys, orderKeysMin), System: s.Name,
				Value: fmt.Sprintf("%.0f vs %.0f/s (%sx)", k.Ordered.PerSecond, k.Unordered.PerSecond, ratio(k.Ordered.PerSecond, k.Unordered.PerSecond)),
				Pass: clean && k.Ordered.Missing == 0 && k.Unordered.Missing == 0 && k.Unordered.PerSecond > 0 &&
					k.Ordered.PerSecond >= orderKeysMin*k.Unordered.PerSecond})
		}
		if h := sc.OrderHot; h != nil {
			out = append(out, Target{Name: fmt.Sprintf("%s >= %.1f x 1/(attempt + claim + record)", modeOrderHot, orderHotMin), System: s.Name,
				Value: fmt.Sprintf("%.0f vs %.0f/s (%.2fx)", h.Drain.PerSecond, h.IdealPerSecond, h.RatioToIdeal),
				Pass:  clean && h.Drain.Missing == 0 && h.IdealPerSecond > 0 && h.RatioToIdeal >= orderHotMin})
		}
		if b := sc.OrderBlocked; b != nil {
			p99(modeOrderBlocked, b.Latency, sc.base(modeOrderBlocked), orderBlockedP99Max)
		}
	}
	return out
}

// endpointTargets: in noisy, the good endpoints' after-commit p99 with
// "bad" hanging is at most twice their baseline p99 and at most 20 ms; in
// fanout, the p99 of commit to the last of an event's receipts is at most
// 50 ms. Each needs every delivery received and every signature good.
func endpointTargets(systems []SystemResult) []Target {
	var out []Target
	for _, s := range systems {
		if n := s.Noisy; n != nil {
			b, h := n.Baseline, n.Hang
			clean := b.Missing == 0 && h.Missing == 0 && b.BadSignatures+b.Misrouted+h.BadSignatures+h.Misrouted == 0 &&
				b.Deliveries > 0 && h.Deliveries > 0
			out = append(out, Target{Name: fmt.Sprintf("noisy good p99 with hang <= %.0f x baseline", noisyFactorMax), System: s.Name,
				Value: fmt.Sprintf("%s vs %s ms", ms(h.After.P99), ms(b.After.P99)),
				Pass:  clean && float64(h.After.P99) <= noisyFactorMax*float64(b.After.P99)})
			out = append(out, Target{Name: "noisy good p99 with hang <= 20 ms", System: s.Name, Value: ms(h.After.P99) + " ms",
				Pass: clean && h.After.P99 <= noisyP99Max})
		}
		if f := s.Fanout; f != nil {
			out = append(out, Target{Name: "fanout last of 100 p99 <= 50 ms", System: s.Name, Value: ms(f.Last.P99) + " ms",
				Pass: f.Missing == 0 && f.Last.N > 0 && f.BadSignatures+f.Misrouted == 0 && f.Last.P99 <= fanoutP99Max})
		}
	}
	return out
}

func drainTargets(by map[string]SystemResult) []Target {
	var out []Target
	for _, c := range []struct {
		worker, river string
		factor        float64
	}{{sysWorkerTuned, sysRiverTuned, drainTunedMin}, {sysWorkerDefaults, sysRiverDefaults, drainDefaultMin}} {
		w, r := by[c.worker].Drain, by[c.river].Drain
		if w == nil || r == nil || r.PerSecond == 0 {
			continue
		}
		out = append(out, Target{
			Name:   fmt.Sprintf("drain >= %.1f x %s", c.factor, c.river),
			System: c.worker,
			Value:  fmt.Sprintf("%.0f vs %.0f/s (%.2fx)", w.PerSecond, r.PerSecond, w.PerSecond/r.PerSecond),
			Pass:   w.Missing == 0 && w.PerSecond >= c.factor*r.PerSecond,
		})
	}
	return out
}

// tailTargets: in tail, worker-defaults reaches 0.8 of its ideal and
// worker-tuned at least river-200's steady rate; in tail-hang, each worker
// system reaches 0.8 of its ideal, every hung event delivered on a retry.
func tailTargets(by map[string]SystemResult) []Target {
	var out []Target
	ideal := func(mode, sys string, t *TailResult) {
		out = append(out, Target{
			Name:   fmt.Sprintf("%s steady >= %.1f x ideal", mode, tailIdealMin),
			System: sys,
			Value:  fmt.Sprintf("%.0f vs %.0f/s (%.2fx)", t.Steady, t.Ideal, t.Ratio),
			Pass:   t.Missing == 0 && t.HungDelivered == t.Hung && t.Ratio >= tailIdealMin,
		})
	}
	if t := by[sysWorkerDefaults].Tail; t != nil {
		ideal(modeTail, sysWorkerDefaults, t)
	}
	if w, r := by[sysWorkerTuned].Tail, by[sysRiver200].Tail; w != nil && r != nil && r.Steady > 0 {
		out = append(out, Target{
			Name:   fmt.Sprintf("tail steady >= %.1f x %s", tailRiverMin, sysRiver200),
			System: sysWorkerTuned,
			Value:  fmt.Sprintf("%.0f vs %.0f/s (%.2fx)", w.Steady, r.Steady, w.Steady/r.Steady),
			Pass:   w.Missing == 0 && w.Steady >= tailRiverMin*r.Steady,
		})
	}
	for _, name := range []string{sysWorkerDefaults, sysWorkerTuned} {
		if t := by[name].TailHang; t != nil {
			ideal(modeTailHang, name, t)
		}
	}
	return out
}
