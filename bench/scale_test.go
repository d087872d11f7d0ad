package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestScaleModesFlags(t *testing.T) {
	opt, err := parseFlags(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(opt.modes, func(m string) bool { return slices.Contains(scaleModes, m) }) {
		t.Errorf("default modes %v include a scale mode", opt.modes)
	}
	if opt.scaleBacklog != 1_000_000 || opt.scaleKept != 3_000_000 || opt.scaleExpired != 1_000_000 || opt.scaleMany != 1000 {
		t.Errorf("scale sizes %d %d %d %d", opt.scaleBacklog, opt.scaleKept, opt.scaleExpired, opt.scaleMany)
	}
	opt, err = parseFlags([]string{"-modes", "latency, scale"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if want := append([]string{modeLatency}, scaleModes...); !slices.Equal(opt.modes, want) {
		t.Errorf("-modes latency,scale = %v, want %v", opt.modes, want)
	}
	if _, err := parseFlags([]string{"-scale-backlog", "0"}, &bytes.Buffer{}); err == nil {
		t.Error("-scale-backlog 0 accepted")
	}
}

func TestRunsScaleModes(t *testing.T) {
	for _, name := range allSystems {
		sys := newSystem(name, options{tunedBatch: 100, tunedConcurrency: 200}, "worker", "self", common{name: name})
		want := name == sysWorkerDefaults || name == sysWorkerTuned || name == sysWorkerBefore || name == sysWorkerBeforeTuned ||
			name == sysWorkerTunedTraced
		for _, mode := range append(append([]string(nil), scaleModes...), orderModes...) {
			want := want && !(newModes[mode] && (name == sysWorkerBefore || name == sysWorkerBeforeTuned))
			if got := runsMode(sys, mode); got != want {
				t.Errorf("runsMode(%s, %s) = %v, want %v", name, mode, got, want)
			}
		}
	}
}

// scaleFixture is a system's scale results, every situation present, each
// exactly at its target's threshold.
func scaleFixture() *ScaleResult {
	lat := func(p99 time.Duration) ScaleLatency {
		return ScaleLatency{Events: 300, Latency: Percentiles{N: 300, P50: time.Millisecond, P99: p99}}
	}
	drain := func(rate float64) ScaleDrain { return ScaleDrain{Deliveries: 20000, PerSecond: rate} }
	return &ScaleResult{
		Baseline: &ScaleBaseline{Latency: lat(2 * time.Millisecond), Drain: drain(1000)},
		Backlog:  &ScaleBacklog{Stuck: 1000, Latency: lat(3 * time.Millisecond), Drain: drain(800)},
		Idle:     &ScaleDrain{Deliveries: 20000, PerSecond: 900},
		Fanout:   &ScaleFanout{Endpoints: 10, Events: 2000, Drain: drain(1000)},
		Many:     &ScaleMany{Endpoints: 1000, Warm: 2 * time.Second},
		History: &ScaleHistory{Kept: 10, KeptLatency: lat(2400 * time.Microsecond), Expired: 10,
			ExpiredDrain: drain(800), ExpiredLatency: lat(2400 * time.Microsecond), Gone: true},
	}
}

func TestScaleTargets(t *testing.T) {
	names := []string{
		"scale-backlog latency p99 <= 1.5 x baseline", "scale-backlog drain >= 0.8 x baseline drain",
		"scale-idle drain >= 0.9 x baseline drain", "scale-fanout deliveries/s >= 1.0 x baseline drain",
		"scale-many COMMIT -> last of 1000 <= 2s", "scale-history kept latency p99 <= 1.2 x baseline",
		"scale-history expired drain >= 0.8 x baseline drain", "scale-history expired latency p99 <= 1.2 x baseline",
	}
	check := func(name string, sc *ScaleResult, wantPass func(target string) bool) {
		t.Helper()
		got := scaleTargets([]SystemResult{{Name: sysWorkerDefaults, Scale: sc}})
		if len(got) != len(names) {
			t.Fatalf("%s: %d targets, want %d: %+v", name, len(got), len(names), got)
		}
		for i, tg := range got {
			if tg.Name != names[i] || tg.Pass != wantPass(tg.Name) {
				t.Errorf("%s: %q pass=%v (%s), want %q pass=%v", name, tg.Name, tg.Pass, tg.Value, names[i], wantPass(names[i]))
			}
		}
	}
	check("at the thresholds", scaleFixture(), func(string) bool { return true })

	sc := scaleFixture()
	sc.Backlog.Latency.Latency.P99 += time.Microsecond
	sc.Idle.PerSecond = 899
	sc.Many.Warm += time.Millisecond
	sc.History.ExpiredDrain.Missing = 1
	failing := []string{names[0], names[2], names[4], names[6]}
	check("just past them", sc, func(n string) bool { return !slices.Contains(failing, n) })

	sc = scaleFixture()
	sc.Baseline.Drain.Missing = 1
	check("baseline drain incomplete", sc, func(n string) bool { return !strings.Contains(n, "drain") })

	sc = scaleFixture()
	sc.Misrouted = 1
	check("a misrouted request", sc, func(string) bool { return false })

	if got := scaleTargets([]SystemResult{{Name: sysWorkerDefaults, Scale: &ScaleResult{Idle: sc.Idle}}}); len(got) != 0 {
		t.Errorf("targets without a baseline: %+v", got)
	}
}

// A situation's ratios are against the mean of the baseline runs around
// it, when there are: here the first baseline (2 ms, 1,000/s) would fail
// the backlog's p99 and drain, the mean of the runs around it (3 ms,
// 800/s) passes them, and the table prints that base.
func TestScaleTargetsAgainstTheRunsAround(t *testing.T) {
	sc := scaleFixture()
	before := *sc.Baseline
	after := ScaleBaseline{Latency: ScaleLatency{Events: 300, Latency: Percentiles{N: 300, P50: time.Millisecond, P99: 4 * time.Millisecond}},
		Drain: ScaleDrain{Deliveries: 20000, PerSecond: 600}}
	around := meanBaseline(before, after)
	if around.Latency.Latency.P99 != 3*time.Millisecond || around.Drain.PerSecond != 800 || around.Latency.Latency.N != 600 {
		t.Fatalf("mean of the runs around: %+v", around)
	}
	sc.Around = map[string]*ScaleBaseline{modeScaleBacklog: around}
	sc.Backlog.Latency.Latency.P99 = 4500 * time.Microsecond // 1.5 x 3 ms
	sc.Backlog.Drain.PerSecond = 640                         // 0.8 x 800/s
	for _, tg := range scaleTargets([]SystemResult{{Name: sysWorkerDefaults, Scale: sc}}) {
		if !tg.Pass {
			t.Errorf("%s: %s, want a pass against the runs around", tg.Name, tg.Value)
		}
	}
	sc.Around = nil
	failed := 0
	for _, tg := range scaleTargets([]SystemResult{{Name: sysWorkerDefaults, Scale: sc}}) {
		if strings.HasPrefix(tg.Name, modeScaleBacklog) && !tg.Pass {
			failed++
		}
	}
	if failed != 2 {
		t.Errorf("against the first baseline alone: %d backlog targets failed, want 2", failed)
	}
	sc.Around = map[string]*ScaleBaseline{modeScaleBacklog: around}
	var out bytes.Buffer
	writeTable(&out, &report{Systems: []SystemResult{{Name: sysWorkerDefaults, Scale: sc}}})
	if !strings.Contains(out.String(), "base (mean of the baseline runs before and after): p99 3.00 ms, 800/s") {
		t.Errorf("table lacks the backlog's base:\n%s", out.String())
	}
}

func TestScaleTable(t *testing.T) {
	rep := &report{Systems: []SystemResult{{Name: sysWorkerDefaults, Scale: scaleFixture()}}}
	var out bytes.Buffer
	writeTable(&out, rep)
	for _, want := range []string{"SCALE", "baseline", "backlog", "idle", "fanout", "many", "history kept", "history expired",
		"p99/base", "1.50", "0.80", "all gone", "scale-many COMMIT -> last of 1000 <= 2s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// TestScaleSmoke runs every scale mode once with tiny sizes against the
// worker (BENCH_TEST_WORKER, or built from ../cmd/worker) on the local
// PostgreSQL (BENCH_TEST_DB): nothing missing, stuck hung and kept its
// backlog, the expired rows were deleted, every signature good.
func TestScaleSmoke(t *testing.T) {
	_, rep := smoke(t, "-systems", sysWorkerDefaults, "-modes", scaleAlias, "-events", "20", "-backlog", "500",
		"-scale-backlog", "3000", "-scale-many", "40", "-scale-history-kept", "5000", "-scale-history-expired", "3000")
	s := rep.Systems[0]
	for mode, e := range s.Errors {
		t.Errorf("mode %s: %s", mode, e)
	}
	sc := s.Scale
	if sc == nil || sc.Baseline == nil || sc.Backlog == nil || sc.Idle == nil || sc.Fanout == nil || sc.Many == nil || sc.History == nil {
		t.Fatalf("scale results missing: %+v", sc)
	}
	if rep.BadSignatures != 0 || duplicates(rep) != 0 {
		t.Errorf("bad signatures %d, duplicates %d", rep.BadSignatures, duplicates(rep))
	}
	// A baseline run before each situation and one after each with a
	// ratio.
	if want := len(scaleModes) + len(bracketed); len(sc.Baselines) != want || len(sc.Around) != len(bracketed) {
		t.Errorf("%d baseline runs and %d situations between them, want %d and %d", len(sc.Baselines), len(sc.Around), want, len(bracketed))
	}
	for i, b := range sc.Baselines {
		if b.Latency.Missing != 0 || b.Drain.Missing != 0 || b.Drain.PerSecond <= 0 {
			t.Errorf("baseline run %d: %+v", i+1, b)
		}
	}
	h := sc.History
	for name, l := range map[string]ScaleLatency{"baseline": sc.Baseline.Latency, "backlog": sc.Backlog.Latency,
		"kept": h.KeptLatency, "expired": h.ExpiredLatency} {
		if l.Events != 20 || l.Missing != 0 || l.Latency.N != 20 {
			t.Errorf("%s latency: %+v", name, l)
		}
	}
	for name, d := range map[string]ScaleDrain{"baseline": sc.Baseline.Drain, "backlog": sc.Backlog.Drain, "idle": *sc.Idle,
		"fanout": sc.Fanout.Drain, "kept": h.KeptDrain, "expired": h.ExpiredDrain} {
		if d.Deliveries != 500 || d.Missing != 0 || d.PerSecond <= 0 {
			t.Errorf("%s drain: %+v", name, d)
		}
	}
	if b := sc.Backlog; b.StuckHung == 0 || b.StuckLeft < int64(b.Stuck)-int64(b.StuckHung) {
		t.Errorf("stuck: hung %d, %d of %d left", b.StuckHung, b.StuckLeft, b.Stuck)
	}
	if m := sc.Many; m.Endpoints != 40 || m.Missing != 0 || m.ColdMissing != 0 || m.Warm <= 0 {
		t.Errorf("many: %+v", m)
	}
	if !h.Gone || h.KeptSize.Total <= 0 || h.ExpiredSize.Total <= 0 {
		t.Errorf("history: gone %v, sizes %+v %+v", h.Gone, h.KeptSize, h.ExpiredSize)
	}
	var out bytes.Buffer
	writeTable(&out, rep)
	if !strings.Contains(out.String(), "SCALE") || !strings.Contains(out.String(), "scale-history expired drain") {
		t.Errorf("table:\n%s", out.String())
	}
}

// TestOrderSmoke runs the ordering modes once with tiny sizes: every row
// delivered (keyed and not), the hot key's figures read from the worker's
// metrics, the blocked run's latency complete, the table's rows printed.
func TestOrderSmoke(t *testing.T) {
	_, rep := smoke(t, "-systems", sysWorkerDefaults, "-modes", orderAlias, "-events", "20", "-backlog", "500",
		"-order-keys", "50", "-order-hot", "30")
	s := rep.Systems[0]
	for mode, e := range s.Errors {
		t.Errorf("mode %s: %s", mode, e)
	}
	sc := s.Scale
	if sc == nil || sc.OrderKeys == nil || sc.OrderHot == nil || sc.OrderBlocked == nil {
		t.Fatalf("ordering results missing: %+v", sc)
	}
	if rep.BadSignatures != 0 || duplicates(rep) != 0 {
		t.Errorf("bad signatures %d, duplicates %d", rep.BadSignatures, duplicates(rep))
	}
	k, h, b := sc.OrderKeys, sc.OrderHot, sc.OrderBlocked
	for name, d := range map[string]ScaleDrain{"unordered": k.Unordered, "keyed": k.Ordered} {
		if d.Deliveries != 50*orderPerKey || d.Missing != 0 {
			t.Errorf("%s drain: %+v", name, d)
		}
	}
	if h.Drain.Deliveries != 30 || h.ScrapeError != "" || h.ClaimMS <= 0 || h.RecordMS <= 0 || h.IdealPerSecond <= 0 || h.SingleSlotPerSec <= 0 {
		t.Errorf("hot key: %+v", h)
	}
	if b.Latency.Events != 20 || b.Latency.Missing != 0 {
		t.Errorf("blocked latency: %+v", b.Latency)
	}
	var out bytes.Buffer
	writeTable(&out, rep)
	for _, want := range []string{"order: keys", "order: hot key", "order: blocked", "order-keys drain >= 0.8 x unordered"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
}
