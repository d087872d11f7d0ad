package main

import (
	"cmp"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
)

// scaleRow is one line of the SCALE table: a situation's latency and drain
// (either may be absent) next to the baseline's.
type scaleRow struct {
	situation, with string
	lat             *ScaleLatency
	drain           *ScaleDrain
	notes           string
	base            *ScaleBaseline // what the ratios are against (nil: the first baseline)
	bracketed       bool           // base is the mean of the runs around it, not the run before
}

// writeScale prints the SCALE section: per worker system the baseline and
// every situation that ran, each latency p99 and drain rate also as a
// ratio to the baseline's.
func writeScale(tw *tabwriter.Writer, rep *report) {
	if !has(rep, func(s SystemResult) bool { return s.Scale != nil }) {
		return
	}
	section(tw, fmt.Sprintf("SCALE  worker only (River has no endpoints); every situation against the baseline of the same run, one endpoint on an empty table; "+
		"WEBHOOK_TIMEOUT_MS=%d, WEBHOOK_RETENTION=7d in every run. latency: one event every %s to the measured endpoint, insert start -> receipt, ms; "+
		"drain: rows inserted first, process start -> last receipt", scaleTimeout.Milliseconds(), latencyInterval),
		"system\tsituation\twith\tlatency p50\tp99\tp99/base\tdrain deliveries\tdeliveries/s\t/base\tmissing (latency / drain)\tnotes")
	for _, s := range rep.Systems {
		sc := s.Scale
		if sc == nil {
			continue
		}
		for _, row := range scaleRows(sc) {
			base := cmp.Or(row.base, sc.Baseline)
			notes := row.notes
			if row.base != nil {
				which := "mean of the baseline runs before and after"
				if !row.bracketed {
					which = "the baseline run before it"
				}
				notes = strings.TrimPrefix(notes+fmt.Sprintf("; base (%s): p99 %s ms, %.0f/s",
					which, ms(base.Latency.Latency.P99), base.Drain.PerSecond), "; ")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, row.situation, row.with, latencyCells(row.lat, base),
				drainCells(row.drain, base), row.missing(), notes)
		}
	}
}

// scaleRows lays out a system's scale results, baseline first.
func scaleRows(sc *ScaleResult) []scaleRow {
	var rows []scaleRow
	if b := sc.Baseline; b != nil {
		rows = append(rows, scaleRow{"baseline", "1 endpoint, empty table", &b.Latency, &b.Drain, "", nil, false})
	}
	if b := sc.Backlog; b != nil {
		rows = append(rows, scaleRow{"backlog", fmt.Sprintf("+ %q: %d pending, never answers", scaleStuck, b.Stuck), &b.Latency, &b.Drain,
			fmt.Sprintf("stuck: %d requests hung, most open %d, %d still pending; setup %s", b.StuckHung, b.StuckPeak, b.StuckLeft, secs(b.Setup)),
			sc.Around[modeScaleBacklog], true})
	}
	if b := sc.Limited; b != nil {
		rows = append(rows, scaleRow{"limited", fmt.Sprintf("+ %q: %d pending, --rate %d/s", scaleStuck, b.Stuck, scaleLimitedRate), &b.Latency, &b.Drain,
			fmt.Sprintf("stuck: busiest second %d, %d still pending; setup %s", b.StuckBusiest, b.StuckLeft, secs(b.Setup)),
			sc.Around[modeScaleLimited], true})
	}
	if d := sc.Idle; d != nil {
		rows = append(rows, scaleRow{"idle", "+ 1 idle endpoint", nil, d, "", sc.Around[modeScaleIdle], true})
	}
	if f := sc.Fanout; f != nil {
		rows = append(rows, scaleRow{"fanout", fmt.Sprintf("%d events x %d endpoints", f.Events, f.Endpoints), nil, &f.Drain, "drain vs the baseline's",
			sc.Around[modeScaleFanout], true})
	}
	if m := sc.Many; m != nil {
		rows = append(rows, scaleRow{"many", fmt.Sprintf("%d endpoints x 1 event, one transaction", m.Endpoints), nil, nil,
			fmt.Sprintf("COMMIT -> last receipt %s ms, %d missing (cold, first round: %s ms, %d missing)", ms(m.Warm), m.Missing, ms(m.Cold), m.ColdMissing), nil, false})
	}
	if h := sc.History; h != nil {
		rows = append(rows,
			scaleRow{"history kept", fmt.Sprintf("%d processed rows, 1 min-6 d old", h.Kept), &h.KeptLatency, &h.KeptDrain,
				fmt.Sprintf("%s; setup %s", sizes(h.KeptSize), secs(h.KeptSetup)), sc.Around[modeScaleHistory], true},
			scaleRow{"history expired", fmt.Sprintf("%d processed rows, 8-10 d old", h.Expired), &h.ExpiredLatency, &h.ExpiredDrain,
				fmt.Sprintf("%s; %d left after the drain, %s; after: %s; setup %s each", sizes(h.ExpiredSize), h.ExpiredLeft, gone(h),
					sizes(h.AfterSize), secs(h.ExpiredSetup)), sc.Around[modeScaleHistory], true})
	}
	return append(rows, orderRows(sc)...)
}

// orderRows lays out the ordering modes' results.
func orderRows(sc *ScaleResult) []scaleRow {
	var rows []scaleRow
	if k := sc.OrderKeys; k != nil {
		rows = append(rows,
			scaleRow{"order: unordered", fmt.Sprintf("%d rows, no key", k.Keys*orderPerKey), nil, &k.Unordered, "", nil, false},
			scaleRow{"order: keys", fmt.Sprintf("%d keys x %d events", k.Keys, orderPerKey), nil, &k.Ordered,
				"keyed / unordered drain " + ratio(k.Ordered.PerSecond, k.Unordered.PerSecond), nil, false})
	}
	if h := sc.OrderHot; h != nil {
		note := fmt.Sprintf("one key: %.2f ms a cycle; attempt %.2f + claim %.2f + record %.2f ms => ideal %.0f/s, ratio %.2f; "+
			"unordered with 1 slot %.0f/s", h.MeanCycleMS, h.AttemptMS, h.ClaimMS, h.RecordMS, h.IdealPerSecond, h.RatioToIdeal, h.SingleSlotPerSec)
		if h.ScrapeError != "" {
			note = "metrics not read: " + h.ScrapeError
		}
		rows = append(rows, scaleRow{"order: hot key", fmt.Sprintf("%d events of one key", h.Drain.Deliveries), nil, &h.Drain, note, nil, false})
	}
	if b := sc.OrderBlocked; b != nil {
		rows = append(rows, scaleRow{"order: blocked", fmt.Sprintf("%d keys blocked, %d rows waiting each", b.Keys, blockedWaiting),
			&b.Latency, nil, "unordered events to the same endpoint", sc.Around[modeOrderBlocked], false})
	}
	return rows
}

// latencyCells prints p50, p99 and p99 over the baseline's p99.
func latencyCells(l *ScaleLatency, base *ScaleBaseline) string {
	if l == nil {
		return "-\t-\t-"
	}
	r := "-"
	if base != nil {
		r = ratio(float64(l.Latency.P99), float64(base.Latency.Latency.P99))
	}
	return fmt.Sprintf("%s\t%s\t%s", ms(l.Latency.P50), ms(l.Latency.P99), r)
}

// drainCells prints deliveries, the rate and the rate over the baseline's.
func drainCells(d *ScaleDrain, base *ScaleBaseline) string {
	if d == nil {
		return "-\t-\t-"
	}
	r := "-"
	if base != nil {
		r = ratio(d.PerSecond, base.Drain.PerSecond)
	}
	return fmt.Sprintf("%d\t%.0f\t%s", d.Deliveries, d.PerSecond, r)
}

// missing prints the latency run's and the drain's missing counts.
func (row scaleRow) missing() string {
	l, d := "-", "-"
	if row.lat != nil {
		l = fmt.Sprint(row.lat.Missing)
	}
	if row.drain != nil {
		d = fmt.Sprint(row.drain.Missing)
	}
	return l + " / " + d
}

// ratio prints a/b, or "-" without a b.
func ratio(a, b float64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func secs(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }

// sizes prints an OutboxSize.
func sizes(o OutboxSize) string {
	return fmt.Sprintf("outbox %s, pending indexes %s", bytesIEC(o.Total), bytesIEC(o.Pending))
}

// gone says when the expired rows were gone, or how many were left.
func gone(h *ScaleHistory) string {
	if h.Gone {
		return fmt.Sprintf("all gone %s after the drain's start", secs(h.GoneAfter))
	}
	return fmt.Sprintf("%d still there %s after the drain's start", h.Left, secs(h.GoneAfter))
}

// bytesIEC prints n bytes in KiB, MiB or GiB.
func bytesIEC(n int64) string {
	switch f := float64(n); {
	case f >= 1<<30:
		return fmt.Sprintf("%.2f GiB", f/(1<<30))
	case f >= 1<<20:
		return fmt.Sprintf("%.1f MiB", f/(1<<20))
	default:
		return fmt.Sprintf("%.0f KiB", f/(1<<10))
	}
}
