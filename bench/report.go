package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// report is everything one bench run measured.
type report struct {
	Options       map[string]any `json:"options"`
	Machine       string         `json:"machine"`
	Started       time.Time      `json:"started"`
	Elapsed       time.Duration  `json:"elapsed_ns"`
	Systems       []SystemResult `json:"systems"`
	BadSignatures int64          `json:"bad_signatures"`
	Targets       []Target       `json:"targets"`
	// Command reproduces the run; Pairs is its rounds of each mode.
	Command string `json:"command"`
	Pairs   int    `json:"pairs"`
	// Systems holds each system's medians over the rounds; Rounds (with
	// -pairs above 1) every round's results, systems in the same order.
	Rounds [][]SystemResult `json:"rounds,omitempty"`
	rounds [][]SystemResult
}

// SystemResult is one system's results; a mode that did not run is nil.
type SystemResult struct {
	Name     string         `json:"name"`
	Settings string         `json:"settings"`
	Database string         `json:"database"` // created for the run, dropped after it
	Latency  *LatencyResult `json:"latency,omitempty"`
	Drain    *DrainResult   `json:"drain,omitempty"`
	Burst    *BurstResult   `json:"burst,omitempty"`
	Cost     *CostResult    `json:"cost,omitempty"`
	Retry    *RetryResult   `json:"retry,omitempty"`
	Tail     *TailResult    `json:"tail,omitempty"`
	TailHang *TailResult    `json:"tail_hang,omitempty"`
	Noisy    *NoisyResult   `json:"noisy,omitempty"`
	Fanout   *FanoutResult  `json:"fanout,omitempty"`
	Flow     *FlowResult    `json:"flow,omitempty"`
	// FanoutFilter is fanout-filter's (modes_filter.go).
	FanoutFilter *FanoutFilterResult `json:"fanout_filter,omitempty"`
	Scale        *ScaleResult        `json:"scale,omitempty"`
	Duplicates   int                 `json:"duplicates"` // deliveries of an already delivered event
	Errors       map[string]string   `json:"errors,omitempty"`
}

func (o options) summary() map[string]any {
	return map[string]any{
		"modes": o.modes, "systems": o.systems, "events": o.events, "poll_events": o.pollEvents,
		"retry_events": o.retryEvents, "backlog": o.backlog, "tail_backlog": o.tailBacklog, "duration": o.duration.String(),
		"producers": o.producers, "cost_pairs": o.costPairs, "cost_duration": o.costDuration.String(),
		"tuned_batch": o.tunedBatch, "tuned_concurrency": o.tunedConcurrency,
		"noisy_duration": o.noisyDuration.String(), "fanout_events": o.fanoutEvents, "pgbouncer": o.pgbouncer,
		"scale_backlog": o.scaleBacklog, "scale_many": o.scaleMany, "scale_history_kept": o.scaleKept,
		"scale_history_expired": o.scaleExpired, "order_keys": o.orderKeys, "order_hot": o.orderHot,
		"payload_bytes": o.payloadBytes, "flow_events": o.flowEvents, "pairs": o.pairs,
		"fanout_filter_events": o.fanoutFilterEvents, "fanout_filter_rounds": o.fanoutFilterRounds,
	}
}

func writeJSON(w io.Writer, rep *report) error {
	rep.Targets = targets(rep)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// writeTable prints the report as aligned plain-text tables.
func writeTable(w io.Writer, rep *report) {
	rep.Targets = targets(rep)
	fmt.Fprintf(w, "Fluxora webhook benchmark — %s; %s; took %s\n", rep.Machine,
		rep.Started.Format(time.RFC3339), rep.Elapsed.Round(time.Second))
	if rep.Pairs > 1 {
		fmt.Fprintf(w, "%d rounds of each mode, alternating which system goes first: every figure below is the median of its rounds "+
			"(a count of what went wrong, the most of any round)\n", rep.Pairs)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	section(tw, "SYSTEMS", "system\tsettings")
	for _, s := range rep.Systems {
		fmt.Fprintf(tw, "%s\t%s\n", s.Name, s.Settings)
	}
	writeModes(tw, rep)
	if rep.Pairs > 1 {
		writeRatios(tw, rep)
	}
	section(tw, "TARGETS", "target\tsystem\tvalue\tresult")
	for _, t := range rep.Targets {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.System, t.Value, passFail(t.Pass))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nbad signatures: %d   duplicate deliveries: %d\n", rep.BadSignatures, duplicates(rep))
	for _, s := range rep.Systems {
		for mode, e := range s.Errors {
			fmt.Fprintf(w, "ERROR %s %s: %s\n", s.Name, mode, firstLine(e))
		}
	}
}

func writeModes(tw *tabwriter.Writer, rep *report) {
	if has(rep, func(s SystemResult) bool { return s.Latency != nil }) {
		section(tw, "LATENCY  insert start -> consumer receipt, ms (one event every 10 ms; poll-only: spread over 11 s)",
			"system\tevents\tp50\tp90\tp99\tmax\tmissing\tcommit p50/p99\tafter commit p50/p99")
		for _, s := range rep.Systems {
			if l := s.Latency; l != nil {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s / %s\t%s / %s\n", s.Name, l.Events, pcts(l.Latency), l.Missing,
					ms(l.Commit.P50), ms(l.Commit.P99), ms(l.After.P50), ms(l.After.P99))
			}
		}
	}
	if has(rep, func(s SystemResult) bool { return s.Drain != nil }) {
		title := "DRAIN  backlog inserted first; process start -> last receipt"
		if n, _ := rep.Options["payload_bytes"].(int); n > 0 {
			title += fmt.Sprintf("; payloads padded with %d bytes", n)
		}
		section(tw, title,
			"system\trows\tseconds\tdeliveries/s\tcpu-s/1k\tdb-cpu-s/1k\tpeak RSS MiB\tmissing")
		for _, s := range rep.Systems {
			if d := s.Drain; d != nil {
				fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.0f\t%.3f\t%.3f\t%.1f\t%d\n", s.Name, d.Rows, d.Elapsed.Seconds(),
					d.PerSecond, d.CPUPer1000, d.DBCPUPer1000, float64(d.PeakRSS)/(1<<20), d.Missing)
			}
		}
	}
	if has(rep, func(s SystemResult) bool { return s.Burst != nil }) {
		section(tw, "BURST  producers insert single-row transactions as fast as they can; latency in ms",
			"system\tinserted\tinserts/s\tdelivered/s\tratio\tp50\tp90\tp99\tmax\tcommit p50/p99\tafter commit p50/p99\tcpu-s/1k\tdb-cpu-s/1k\tmissing")
		for _, s := range rep.Systems {
			if b := s.Burst; b != nil {
				fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.3f\t%s\t%s / %s\t%s / %s\t%.3f\t%.3f\t%d\n", s.Name, b.Inserted, b.InsertRate,
					b.DeliveredRate, b.Ratio, pcts(b.Latency), ms(b.Commit.P50), ms(b.Commit.P99), ms(b.After.P50), ms(b.After.P99),
					b.CPUPer1000, b.DBCPUPer1000, b.Missing)
			}
		}
	}
	if has(rep, func(s SystemResult) bool { return s.Cost != nil }) {
		section(tw, "PRODUCER COST  commits/s with the worker running (polling every 10 ms); trigger on vs dropped",
			"system\ton (runs)\toff (runs)\tratio")
		for _, s := range rep.Systems {
			if c := s.Cost; c != nil {
				fmt.Fprintf(tw, "%s\t%.0f (%s)\t%.0f (%s)\t%.3f\n", s.Name, mean(c.On), rates(c.On),
					mean(c.Off), rates(c.Off), c.Ratio)
			}
		}
	}
	if has(rep, func(s SystemResult) bool { return s.Retry != nil }) {
		section(tw, "RETRY  first attempt answered 503; attempt-2 receipt minus its due time, ms",
			"system\tretries\tp50\tp90\tp99\tmax\tearly\tmissing")
		for _, s := range rep.Systems {
			if r := s.Retry; r != nil {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\n", s.Name, r.Lateness.N, pcts(r.Lateness), r.Early, r.Missing)
			}
		}
	}
	writeTail(tw, rep, "TAIL  backlog drain; the consumer answers in 20 ms, one request in 100 in 2 s",
		func(s SystemResult) *TailResult { return s.Tail })
	writeTail(tw, rep, fmt.Sprintf("TAIL-HANG  backlog drain; the consumer answers in 20 ms, one first attempt in 100 never (request timeout %s)",
		hangTimeout), func(s SystemResult) *TailResult { return s.TailHang })
	writeEndpointModes(tw, rep)
	writeFlow(tw, rep)
	writeScale(tw, rep)
	writeFanoutFilter(tw, rep)
}

// writeTail prints a tail mode's section: steady = deliveries/s between the
// 10% and 90% completions; whole = process start to last receipt; ideal =
// slots / mean service time; ratio = steady / ideal.
func writeTail(tw *tabwriter.Writer, rep *report, title string, get func(SystemResult) *TailResult) {
	if !has(rep, func(s SystemResult) bool { return get(s) != nil }) {
		return
	}
	section(tw, title, "system\trows\tslots\tsteady/s\twhole-run/s\tideal/s\tratio\thung delivered\tmissing\tduplicates")
	for _, s := range rep.Systems {
		if t := get(s); t != nil {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%.0f\t%.0f\t%.0f\t%.3f\t%s\t%d\t%d\n", s.Name, t.Rows, slots(t), t.Steady,
				t.Whole, t.Ideal, t.Ratio, hung(t), t.Missing, t.Duplicates)
		}
	}
}

// slots prints a tail result's slots, marked when they were not read from
// the system but assumed.
func slots(t *TailResult) string {
	if t.SlotsSource == slotsAssumed {
		return fmt.Sprintf("%d (assumed)", t.Slots)
	}
	return fmt.Sprint(t.Slots)
}

// hung prints how many hung events were delivered on a retry, of how many.
func hung(t *TailResult) string {
	if t.Timeout == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d", t.HungDelivered, t.Hung)
}

func section(tw *tabwriter.Writer, title, header string) {
	tw.Flush()
	fmt.Fprintf(tw, "\n%s\n%s\n", title, header)
}

func has(rep *report, f func(SystemResult) bool) bool {
	for _, s := range rep.Systems {
		if f(s) {
			return true
		}
	}
	return false
}

func pcts(p Percentiles) string {
	return strings.Join([]string{ms(p.P50), ms(p.P90), ms(p.P99), ms(p.Max)}, "\t")
}

func rates(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(s, " ")
}

func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func duplicates(rep *report) int {
	n := 0
	for _, s := range rep.Systems {
		n += s.Duplicates
		if s.Noisy != nil {
			n += s.Noisy.Baseline.Duplicates + s.Noisy.Hang.Duplicates
		}
		if s.Fanout != nil {
			n += s.Fanout.Duplicates
		}
		if s.Scale != nil {
			n += s.Scale.Duplicates
		}
		if s.FanoutFilter != nil {
			n += s.FanoutFilter.Duplicates
		}
	}
	return n
}

// endpointBadSignatures counts the endpoint modes' bad signatures and
// misrouted requests (their endpoints have their own consumer).
func endpointBadSignatures(rep *report) int64 {
	var n int64
	for _, s := range rep.Systems {
		if s.Noisy != nil {
			for _, r := range []NoisyRun{s.Noisy.Baseline, s.Noisy.Hang} {
				n += r.BadSignatures + r.Misrouted
			}
		}
		if s.Fanout != nil {
			n += s.Fanout.BadSignatures + s.Fanout.Misrouted
		}
		if s.Scale != nil {
			n += s.Scale.BadSignatures + s.Scale.Misrouted
		}
		if s.FanoutFilter != nil {
			n += s.FanoutFilter.BadSignatures + s.FanoutFilter.Misrouted
		}
	}
	return n
}

// writeEndpointModes prints the noisy and fanout sections (worker only).
func writeEndpointModes(tw *tabwriter.Writer, rep *report) {
	if has(rep, func(s SystemResult) bool { return s.Noisy != nil }) {
		section(tw, fmt.Sprintf("NOISY  %d endpoints, %d events/s in total, each to all; \"%s\" answers at once (baseline) or hangs until the %s timeout (hang); "+
			"latency of the %d good endpoints' deliveries, ms (worker only: River has no endpoints)", noisyGood+1, noisyRate, noisyBad, noisyTimeout, noisyGood),
			"system\trun\tevents\tgood deliveries\tafter commit p50\tp90\tp99\tmax\tworst endpoint p99\tinsert->receipt p50/p99\tmissing\t"+
				"bad: delivered / hung / most open (its limit's start, slots - start)\tbad sigs / misrouted")
		for _, s := range rep.Systems {
			if n := s.Noisy; n != nil {
				for _, r := range []struct {
					name string
					run  NoisyRun
				}{{"baseline", n.Baseline}, {"hang", n.Hang}} {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s (%s)\t%s / %s\t%d\t%d / %d / %d (%d, %d)\t%d / %d\n", s.Name, r.name, r.run.Events,
						r.run.Deliveries, pcts(r.run.After), ms(r.run.WorstP99), r.run.Worst, ms(r.run.Latency.P50), ms(r.run.Latency.P99),
						r.run.Missing, r.run.BadDelivered, r.run.BadHung, r.run.BadPeak, r.run.EndpointCap, r.run.Slots-r.run.EndpointCap, r.run.BadSignatures, r.run.Misrouted)
				}
			}
		}
	}
	if has(rep, func(s SystemResult) bool { return s.Fanout != nil }) {
		section(tw, fmt.Sprintf("FANOUT  one event every %s, each to %d endpoints (one loopback server, a path each); COMMIT -> the last of its receipts, ms "+
			"(worker only: River has no endpoints)", fanoutGap, fanoutWidth),
			"system\tevents\tendpoints\tlast p50\tp90\tp99\tmax\teach receipt p50/p99\tinsert->last p50/p99\tmissing\tincomplete events\tbad sigs / misrouted")
		for _, s := range rep.Systems {
			if f := s.Fanout; f != nil {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s / %s\t%s / %s\t%d\t%d\t%d / %d\n", s.Name, f.Events, f.Endpoints, pcts(f.Last),
					ms(f.Each.P50), ms(f.Each.P99), ms(f.LastInsert.P50), ms(f.LastInsert.P99), f.Missing, f.Incomplete, f.BadSignatures, f.Misrouted)
			}
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
