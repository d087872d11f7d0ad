package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRoundOrder(t *testing.T) {
	for round, want := range [][]int{{0, 1, 2}, {2, 1, 0}, {0, 1, 2}} {
		if got := roundOrder(3, round); !slices.Equal(got, want) {
			t.Errorf("round %d: %v, want %v", round, got, want)
		}
	}
}

func TestPairsFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"-systems", sysWorkerTuned + "," + sysRiverTuned}, 3},
		{[]string{"-systems", sysWorkerTuned}, 1},
		{[]string{"-systems", sysWorkerTuned + "," + sysRiverTuned, "-pairs", "1"}, 1},
		{[]string{"-systems", sysWorkerTuned, "-pairs", "5"}, 5},
	} {
		o, err := parseFlags(tc.args, &bytes.Buffer{})
		if err != nil || o.pairs != tc.want {
			t.Errorf("%v: pairs %d (%v), want %d", tc.args, o.pairs, err, tc.want)
		}
	}
	if _, err := parseFlags([]string{"-pairs", "-1"}, &bytes.Buffer{}); err == nil {
		t.Error("-pairs -1 accepted")
	}
}

// Every figure is the median of its rounds, but counts of what went wrong
// are the worst round's; lists are concatenated; errors keep their round.
func TestMedianResults(t *testing.T) {
	lat := func(p99 time.Duration, missing int) *LatencyResult {
		return &LatencyResult{Events: 300, Latency: Percentiles{N: 300, P99: p99}, Missing: missing}
	}
	rounds := []SystemResult{
		{Name: "w", Latency: lat(5*time.Millisecond, 0), Drain: &DrainResult{PerSecond: 100}, Cost: &CostResult{On: []float64{1}}},
		{Name: "w", Latency: lat(1*time.Millisecond, 2), Drain: &DrainResult{PerSecond: 300}, Cost: &CostResult{On: []float64{2}},
			Errors: map[string]string{"retry": "boom"}},
		{Name: "w", Latency: lat(3*time.Millisecond, 0), Cost: &CostResult{On: []float64{3}}},
	}
	m := medianResults(rounds)
	if m.Latency.Latency.P99 != 3*time.Millisecond || m.Latency.Events != 300 {
		t.Errorf("latency p99 %s events %d, want 3ms and 300", m.Latency.Latency.P99, m.Latency.Events)
	}
	if m.Latency.Missing != 2 {
		t.Errorf("missing %d, want the worst round's 2", m.Latency.Missing)
	}
	if m.Drain == nil || m.Drain.PerSecond != 200 {
		t.Errorf("drain %+v, want the mean of the two rounds that ran, 200/s", m.Drain)
	}
	if !slices.Equal(m.Cost.On, []float64{1, 2, 3}) {
		t.Errorf("cost runs %v, want all three", m.Cost.On)
	}
	if m.Errors["retry"] != "round 2: boom" {
		t.Errorf("errors %v", m.Errors)
	}
}

// A ratio is the median of the rounds' ratios, not the ratio of the
// medians: here the medians' ratio is 1.00, the rounds' 0.50, 2.00 and
// 0.80.
func TestRatiosAreMediansOfRounds(t *testing.T) {
	round := func(w, r time.Duration) []SystemResult {
		return []SystemResult{
			{Name: sysWorkerTuned, Latency: &LatencyResult{Latency: Percentiles{N: 1, P99: w}}},
			{Name: sysRiverTuned, Latency: &LatencyResult{Latency: Percentiles{N: 1, P99: r}}},
		}
	}
	rep := &report{Pairs: 3, rounds: [][]SystemResult{
		round(2*time.Millisecond, 4*time.Millisecond),
		round(8*time.Millisecond, 4*time.Millisecond),
		round(4*time.Millisecond, 5*time.Millisecond),
	}}
	rep.Systems = []SystemResult{medianResults([]SystemResult{rep.rounds[0][0], rep.rounds[1][0], rep.rounds[2][0]}),
		medianResults([]SystemResult{rep.rounds[0][1], rep.rounds[1][1], rep.rounds[2][1]})}
	tables := resultTables(rep)
	if len(tables) != 1 || tables[0].title != "Latency and burst" {
		t.Fatalf("tables %+v", tables)
	}
	tb := tables[0]
	if want := []string{"figure", sysWorkerTuned, sysRiverTuned, sysWorkerTuned + " ÷ " + sysRiverTuned}; !slices.Equal(tb.header, want) {
		t.Errorf("header %v, want %v", tb.header, want)
	}
	var row []string
	for _, r := range tb.rows {
		if r[0] == "latency p99 (ms)" {
			row = r
		}
	}
	if want := []string{"latency p99 (ms)", "4.00", "4.00", "0.80 (0.50–2.00)"}; !slices.Equal(row, want) {
		t.Errorf("row %v, want %v", row, want)
	}
	var md bytes.Buffer
	rep.Command, rep.Machine = "go run . -pairs 3", "2 CPUs"
	writeResults(&md, rep)
	for _, want := range []string{"# Benchmark results", "- Command, from `bench/`: `go run . -pairs 3`", "## Latency and burst",
		"| latency p99 (ms) | 4.00 | 4.00 | 0.80 (0.50–2.00) |", "Rounds: 3"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("RESULTS.md lacks %q:\n%s", want, md.String())
		}
	}
}

func TestCommandLine(t *testing.T) {
	got := commandLine([]string{"-modes", "latency,drain", "-results", "RESULTS.md", "-db", "postgres://x@h/p?a=b&c=d"})
	want := "go run . -modes latency,drain -results RESULTS.md -db 'postgres://x@h/p?a=b&c=d'"
	if got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}
