package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// figure is one number a mode yields per system and round, a row of the
// medians' tables.
type figure struct {
	group string // the table it is in: one per group of modes
	name  string // the row's label, with its unit
	// ratio marks a ratio within one system's round (situation vs
	// baseline, trigger on vs off, …): printed as its median and its
	// spread over the rounds, and not compared across systems.
	ratio  bool
	format func(float64) string
	get    func(SystemResult) (float64, bool)
}

// The groups of modes, one table each, in this order.
var figureGroups = []string{
	"Latency and burst", "Drain and tail", "Retry", "Producer cost", "Noisy neighbour and fan-out", "Flow control", "Scale", "Ordering",
}

// comparisons are the cross-system ratios: each figure of a system over
// the same figure of another, run in the same round. The pairs where
// neither figure ran are left out.
var comparisons = [][2]string{
	{sysWorkerDefaults, sysRiverTuned}, {sysWorkerTuned, sysRiverTuned},
	{sysWorkerDefaults, sysRiverDefaults}, {sysWorkerTuned, sysRiver200},
	{sysWorkerDefaults, sysWorkerBefore}, {sysWorkerTuned, sysWorkerBeforeTuned},
	{sysWorkerTunedIdle, sysWorkerTuned}, {sysWorkerTunedDead, sysWorkerTuned}, {sysWorkerTunedTraced, sysWorkerTuned},
}

func fmtMS(v float64) string   { return ms(time.Duration(v * float64(time.Millisecond))) }
func fmtRate(v float64) string { return fmt.Sprintf("%.0f", v) }
func fmtX(v float64) string    { return fmt.Sprintf("%.2f", v) }
func fmtCPU(v float64) string  { return fmt.Sprintf("%.3f", v) }
func fmtMiB(v float64) string  { return fmt.Sprintf("%.1f", v) }
func msOf(d time.Duration) float64 {
	return float64(d) / float64(time.Millisecond)
}

// quotient is a / b, not ok without a b.
func quotient(a, b float64) (float64, bool) { return a / b, b > 0 }

var figures = []figure{
	{"Latency and burst", "latency p50 (ms)", false, fmtMS, func(s SystemResult) (float64, bool) {
		return ptrMS(s.Latency, func(l *LatencyResult) time.Duration { return l.Latency.P50 })
	}},
	{"Latency and burst", "latency p99 (ms)", false, fmtMS, func(s SystemResult) (float64, bool) {
		return ptrMS(s.Latency, func(l *LatencyResult) time.Duration { return l.Latency.P99 })
	}},
	{"Latency and burst", "latency after COMMIT p99 (ms)", false, fmtMS, func(s SystemResult) (float64, bool) {
		return ptrMS(s.Latency, func(l *LatencyResult) time.Duration { return l.After.P99 })
	}},
	{"Latency and burst", "burst inserts/s", false, fmtRate, func(s SystemResult) (float64, bool) {
		return ptrF(s.Burst, func(b *BurstResult) float64 { return b.InsertRate })
	}},
	{"Latency and burst", "burst delivered / inserted", true, fmtX, func(s SystemResult) (float64, bool) {
		return ptrF(s.Burst, func(b *BurstResult) float64 { return b.Ratio })
	}},
	{"Latency and burst", "burst latency p50 (ms)", false, fmtMS, func(s SystemResult) (float64, bool) {
		return ptrMS(s.Burst, func(b *BurstResult) time.Duration { return b.Latency.P50 })
	}},
	{"Latency and burst", "burst latency p99 (ms)", false, fmtMS, func(s SystemResult) (float64, bool) {
		return ptrMS(s.Burst, func(b *BurstResult) time.Duration { return b.Latency.P99 })
	}},
	{"Drain and tail", "drain deliveries/s", false, fmtRate, func(s SystemResult) (float64, bool) {
		return ptrF(s.Drain, func(d *DrainResult) float64 { return d.PerSecond })
	}},
	{"Drain and tail", "drain CPU s / 1,000", false, fmtCPU, func(s SystemResult) (float64, bool) {
		return ptrF(s.Drain, func(d *DrainResult) float64 { return d.CPUPer1000 })
	}},
	{"Drain and tail", "drain PostgreSQL CPU s / 1,000", false, fmtCPU, func(s SystemResult) (float64, bool) {
		return ptrF(s.Drain, func(d *DrainResult) float64 { return d.DBCPUPer1000 })
	}},
	{"Drain and tail", "drain peak RSS (MiB)", false, fmtMiB, func(s SystemResult) (float64, bool) {
		return ptrF(s.Drain, func(d *DrainResult) float64 { return float64(d.PeakRSS) / (1 << 20) })
	}},
	{"Drain and tail", "tail steady deliveries/s", false, fmtRate, func(s SystemResult) (float64, bool) {
		return ptrF(s.Tail, func(t *TailResult) float64 { return t.Steady })
	}},
	{"Drain and tail", "tail steady / ideal", true, fmtX, func(s SystemResult) (float64, bool) {
		return ptrF(s.Tail, func(t *TailResult) float64 { return t.Ratio })
	}},
	{"Drain and tail", "tail-hang steady deliveries/s", false, fmtRate, func(s SystemResult) (float64, bool) {
		return ptrF(s.TailHang, func(t *TailResult) float64 { return t.Steady })
	}},
	{"Drain and tail", "tail-hang steady / ideal", true, fmtX, func(s SystemResult) (float64, bool) {
		return ptrF(s.TailHang, func(t *TailResult) float64 { return t.Ratio })
	}},
	{"Retry", "retry lateness p50 (ms)", false, fmtMS, func(s SystemResult) (float64, bool) {
		return ptrMS(s.Retry, func(r *RetryResult) time.Duration { return r.Lateness.P50 })
	}},
	{"Retry", "retry lateness p99 (ms)", false, fmtMS, func(s SystemResult) (float64, bool) {
		return ptrMS(s.Retry, func(r *RetryResult) time.Duration { return r.Lateness.P99 })
	}},
	{"Producer cost", "commits/s, trigger on", false, fmtRate, func(s SystemResult) (float64, bool) {
		return ptrF(s.Cost, func(c *CostResult) float64 { return mean(c.On) })
	}},
	{"Producer cost", "commits/s, trigger dropped", false, fmtRate, func(s SystemResult) (float64, bool) {
		return ptrF(s.Cost, func(c *CostResult) float64 { return mean(c.Off) })
	}},
	{"Producer cost", "on / off", true, fmtX, func(s SystemResult) (float64, bool) {
		return ptrF(s.Cost, func(c *CostResult) float64 { return c.Ratio })
	}},
	{"Noisy neighbour and fan-out", "noisy: good p99 after COMMIT, baseline (ms)", false, fmtMS, func(s SystemResult) (float64, bool) {
		return ptrMS(s.Noisy, func(n *NoisyResult) time.Duration { return n.Baseline.After.P99 })
	}},
	{"Noisy neighbour and fan-out", "noisy: good p99 after COMMIT, bad hanging (ms)", false, fmtMS, func(s SystemResult) (float64, bool) {
		return ptrMS(s.Noisy, func(n *NoisyResult) time.Duration { return n.Hang.After.P99 })
	}},
	{"Noisy neighbour and fan-out", "noisy: hanging / baseline p99", true, fmtX, func(s SystemResult) (float64, bool) {
		if s.Noisy == nil {
			return 0, false
		}
		return quotient(float64(s.Noisy.Hang.After.P99), float64(s.Noisy.Baseline.After.P99))
	}},
	{"Noisy neighbour and fan-out", "fanout: COMMIT to last of 100 p50 (ms)", false, fmtMS, func(s SystemResult) (float64, bool) {
		return ptrMS(s.Fanout, func(f *FanoutResult) time.Duration { return f.Last.P50 })
	}},
	{"Noisy neighbour and fan-out", "fanout: COMMIT to last of 100 p99 (ms)", false, fmtMS, func(s SystemResult) (float64, bool) {
		return ptrMS(s.Fanout, func(f *FanoutResult) time.Duration { return f.Last.P99 })
	}},
}

func init() {
	figures = append(figures, flowFigures()...)
	figures = append(figures, scaleFigures()...)
}

// scaleFigures are the scale and ordering modes' figures: each situation
// against the baseline of the same round (ScaleResult.base).
func scaleFigures() []figure {
	sc := func(get func(*ScaleResult) (float64, bool)) func(SystemResult) (float64, bool) {
		return func(s SystemResult) (float64, bool) {
			if s.Scale == nil {
				return 0, false
			}
			return get(s.Scale)
		}
	}
	p99 := func(l *ScaleLatency, b *ScaleBaseline) (float64, bool) {
		if l == nil || b == nil || l.Latency.N == 0 {
			return 0, false
		}
		return quotient(float64(l.Latency.P99), float64(b.Latency.Latency.P99))
	}
	drain := func(d *ScaleDrain, b *ScaleBaseline) (float64, bool) {
		if d == nil || b == nil {
			return 0, false
		}
		return quotient(d.PerSecond, b.Drain.PerSecond)
	}
	const g = "Scale"
	return []figure{
		{g, "baseline: latency p99 (ms)", false, fmtMS, sc(func(c *ScaleResult) (float64, bool) {
			return ptrMS(c.Baseline, func(b *ScaleBaseline) time.Duration { return b.Latency.Latency.P99 })
		})},
		{g, "baseline: drain deliveries/s", false, fmtRate, sc(func(c *ScaleResult) (float64, bool) {
			return ptrF(c.Baseline, func(b *ScaleBaseline) float64 { return b.Drain.PerSecond })
		})},
		{g, "backlog: p99 / baseline", true, fmtX, sc(func(c *ScaleResult) (float64, bool) {
			if c.Backlog == nil {
				return 0, false
			}
			return p99(&c.Backlog.Latency, c.base(modeScaleBacklog))
		})},
		{g, "backlog: drain / baseline", true, fmtX, sc(func(c *ScaleResult) (float64, bool) {
			if c.Backlog == nil {
				return 0, false
			}
			return drain(&c.Backlog.Drain, c.base(modeScaleBacklog))
		})},
		{g, "limited: p99 / baseline", true, fmtX, sc(func(c *ScaleResult) (float64, bool) {
			if c.Limited == nil {
				return 0, false
			}
			return p99(&c.Limited.Latency, c.base(modeScaleLimited))
		})},
		{g, "limited: drain / baseline", true, fmtX, sc(func(c *ScaleResult) (float64, bool) {
			if c.Limited == nil {
				return 0, false
			}
			return drain(&c.Limited.Drain, c.base(modeScaleLimited))
		})},
		{g, "idle: drain / baseline", true, fmtX, sc(func(c *ScaleResult) (float64, bool) {
			return drain(c.Idle, c.base(modeScaleIdle))
		})},
		{g, "fanout: deliveries/s / baseline drain", true, fmtX, sc(func(c *ScaleResult) (float64, bool) {
			if c.Fanout == nil {
				return 0, false
			}
			return drain(&c.Fanout.Drain, c.base(modeScaleFanout))
		})},
		{g, "many: COMMIT to last receipt, warm (ms)", false, fmtMS, sc(func(c *ScaleResult) (float64, bool) {
			return ptrMS(c.Many, func(m *ScaleMany) time.Duration { return m.Warm })
		})},
		{g, "many: COMMIT to last receipt, cold (ms)", false, fmtMS, sc(func(c *ScaleResult) (float64, bool) {
			return ptrMS(c.Many, func(m *ScaleMany) time.Duration { return m.Cold })
		})},
		{g, "history kept: p99 / baseline", true, fmtX, sc(func(c *ScaleResult) (float64, bool) {
			if c.History == nil {
				return 0, false
			}
			return p99(&c.History.KeptLatency, c.base(modeScaleHistory))
		})},
		{g, "history kept: drain / baseline", true, fmtX, sc(func(c *ScaleResult) (float64, bool) {
			if c.History == nil {
				return 0, false
			}
			return drain(&c.History.KeptDrain, c.base(modeScaleHistory))
		})},
		{g, "history expiring: p99 / baseline", true, fmtX, sc(func(c *ScaleResult) (float64, bool) {
			if c.History == nil {
				return 0, false
			}
			return p99(&c.History.ExpiredLatency, c.base(modeScaleHistory))
		})},
		{g, "history expiring: drain / baseline", true, fmtX, sc(func(c *ScaleResult) (float64, bool) {
			if c.History == nil {
				return 0, false
			}
			return drain(&c.History.ExpiredDrain, c.base(modeScaleHistory))
		})},
		{"Ordering", "keys: keyed / unordered drain", true, fmtX, sc(func(c *ScaleResult) (float64, bool) {
			if c.OrderKeys == nil {
				return 0, false
			}
			return quotient(c.OrderKeys.Ordered.PerSecond, c.OrderKeys.Unordered.PerSecond)
		})},
		{"Ordering", "hot key: deliveries/s / ideal", true, fmtX, sc(func(c *ScaleResult) (float64, bool) {
			return ptrF(c.OrderHot, func(h *OrderHot) float64 { return h.RatioToIdeal })
		})},
		{"Ordering", "blocked keys: p99 / baseline", true, fmtX, sc(func(c *ScaleResult) (float64, bool) {
			if c.OrderBlocked == nil {
				return 0, false
			}
			return p99(&c.OrderBlocked.Latency, c.base(modeOrderBlocked))
		})},
	}
}

// ptrMS is get(p) in milliseconds, not ok for a nil p.
func ptrMS[T any](p *T, get func(*T) time.Duration) (float64, bool) {
	if p == nil {
		return 0, false
	}
	return msOf(get(p)), true
}

// ptrF is get(p), not ok for a nil p.
func ptrF[T any](p *T, get func(*T) float64) (float64, bool) {
	if p == nil {
		return 0, false
	}
	return get(p), true
}

// spread is a figure's values over the rounds: median, least and most.
type spread struct {
	n             int
	med, min, max float64
}

func spreadOf(xs []float64) (spread, bool) {
	if len(xs) == 0 {
		return spread{}, false
	}
	xs = slices.Clone(xs)
	m := median(xs) // sorts
	return spread{len(xs), m, xs[0], xs[len(xs)-1]}, true
}

// ratioCell prints a ratio's median and, over more than one round, its
// spread.
func ratioCell(s spread) string {
	if s.n < 2 {
		return fmtX(s.med)
	}
	return fmt.Sprintf("%s (%s–%s)", fmtX(s.med), fmtX(s.min), fmtX(s.max))
}

// resultTable is one group's table: a row per figure, a column per
// system that has one of its figures and per comparison with data.
type resultTable struct {
	title  string
	header []string
	rows   [][]string
}

// resultTables lays out every group that has a figure.
func resultTables(rep *report) []resultTable {
	names := make([]string, len(rep.Systems))
	for j, s := range rep.Systems {
		names[j] = s.Name
	}
	index := func(name string) int { return slices.Index(names, name) }
	// values[f][j]: figure f of system j, one per round it ran in;
	// ratios[f][c]: comparison c's per-round ratios of figure f.
	values := make([][][]float64, len(figures))
	ratios := make([][][]float64, len(figures))
	for f, fig := range figures {
		values[f] = make([][]float64, len(names))
		ratios[f] = make([][]float64, len(comparisons))
		for _, round := range rep.rounds {
			for j := range names {
				if v, ok := fig.get(round[j]); ok {
					values[f][j] = append(values[f][j], v)
				}
			}
			if fig.ratio {
				continue
			}
			for c, cmp := range comparisons {
				a, b := index(cmp[0]), index(cmp[1])
				if a < 0 || b < 0 {
					continue
				}
				va, oka := fig.get(round[a])
				vb, okb := fig.get(round[b])
				if oka && okb && vb > 0 {
					ratios[f][c] = append(ratios[f][c], va/vb)
				}
			}
		}
	}
	var out []resultTable
	for _, group := range figureGroups {
		var fs []int
		for f, fig := range figures {
			if fig.group == group && slices.ContainsFunc(values[f], func(v []float64) bool { return len(v) > 0 }) {
				fs = append(fs, f)
			}
		}
		if len(fs) == 0 {
			continue
		}
		var sysCols, cmpCols []int
		for j := range names {
			if slices.ContainsFunc(fs, func(f int) bool { return len(values[f][j]) > 0 }) {
				sysCols = append(sysCols, j)
			}
		}
		for c := range comparisons {
			if slices.ContainsFunc(fs, func(f int) bool { return len(ratios[f][c]) > 0 }) {
				cmpCols = append(cmpCols, c)
			}
		}
		t := resultTable{title: group, header: []string{"figure"}}
		for _, j := range sysCols {
			t.header = append(t.header, names[j])
		}
		for _, c := range cmpCols {
			t.header = append(t.header, comparisons[c][0]+" ÷ "+comparisons[c][1])
		}
		for _, f := range fs {
			fig := figures[f]
			row := []string{fig.name}
			for _, j := range sysCols {
				cell := "–"
				if s, ok := spreadOf(values[f][j]); ok {
					cell = fig.format(s.med)
					if fig.ratio {
						cell = ratioCell(s)
					}
				}
				row = append(row, cell)
			}
			for _, c := range cmpCols {
				cell := "–"
				if s, ok := spreadOf(ratios[f][c]); ok {
					cell = ratioCell(s)
				}
				row = append(row, cell)
			}
			t.rows = append(t.rows, row)
		}
		out = append(out, t)
	}
	return out
}

// writeRatios prints the medians' tables under the per-system tables.
func writeRatios(tw *tabwriter.Writer, rep *report) {
	for _, t := range resultTables(rep) {
		section(tw, fmt.Sprintf("MEDIANS AND RATIOS: %s  (%d rounds; ratio: median of the rounds' ratios, min–max)", strings.ToUpper(t.title), rep.Pairs),
			strings.Join(t.header, "\t"))
		for _, r := range t.rows {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
	}
}

// writeResultsFile writes rep as RESULTS.md to path.
func writeResultsFile(path string, rep *report) error {
	var b bytes.Buffer
	writeResults(&b, rep)
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// writeResults writes the current figures as Markdown: when, where and how
// they were measured, the systems, then one table per group of modes.
func writeResults(w io.Writer, rep *report) {
	fmt.Fprintf(w, "# Benchmark results\n\n")
	fmt.Fprintf(w, "The figures of the latest run of the bench (how to run it and what each figure means: [README.md](README.md)). "+
		"Earlier runs are in this file's git history.\n\n")
	fmt.Fprintf(w, "- Date: %s UTC (the run took %s)\n", rep.Started.UTC().Format("2006-01-02 15:04"), rep.Elapsed.Round(time.Second))
	fmt.Fprintf(w, "- Machine: %s\n", rep.Machine)
	fmt.Fprintf(w, "- Command, from `bench/`: `%s`\n", rep.Command)
	fmt.Fprintf(w, "- Rounds: %d. In each round every system ran each mode once, in the order of the table below in odd rounds and the reverse in even ones. "+
		"A system's figure is the median of its rounds; a ratio is the median of the rounds' ratios, least–most in parentheses.\n", rep.Pairs)
	fmt.Fprintf(w, "- Bad signatures: %d; duplicate deliveries: %d (each system's round with the most).\n\n", rep.BadSignatures, duplicates(rep))
	fmt.Fprintf(w, "| system | settings |\n|---|---|\n")
	for _, s := range rep.Systems {
		fmt.Fprintf(w, "| %s | %s |\n", s.Name, strings.ReplaceAll(s.Settings, "|", `\|`))
	}
	for _, t := range resultTables(rep) {
		fmt.Fprintf(w, "\n## %s\n\n| %s |\n|%s\n", t.title, strings.Join(t.header, " | "), strings.Repeat("---|", len(t.header)))
		for _, r := range t.rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
		}
	}
	var errs []string
	for _, s := range rep.Systems {
		for mode, e := range s.Errors {
			errs = append(errs, fmt.Sprintf("- %s %s: %s", s.Name, mode, firstLine(e)))
		}
	}
	if len(errs) > 0 {
		slices.Sort(errs)
		fmt.Fprintf(w, "\n## Errors\n\n%s\n", strings.Join(errs, "\n"))
	}
}
