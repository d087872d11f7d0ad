package main

import (
	"slices"
	"testing"
)

// fanout-filter runs where the other endpoint modes run but on an earlier
// release (no filters there), only when named.
func TestRunsFanoutFilter(t *testing.T) {
	if slices.Contains(allModes, modeFanoutFilter) || !slices.Contains(knownModes, modeFanoutFilter) {
		t.Fatalf("fanout-filter: default %v, known %v", allModes, knownModes)
	}
	for _, name := range allSystems {
		sys := newSystem(name, options{tunedBatch: 100, tunedConcurrency: 200}, "worker", "self", common{name: name})
		want := runsMode(sys, modeFanout) && name != sysWorkerBefore && name != sysWorkerBeforeTuned
		if got := runsMode(sys, modeFanoutFilter); got != want {
			t.Errorf("runsMode(%s, fanout-filter) = %v, want %v", name, got, want)
		}
	}
}

// TestFanoutFilterSmoke runs fanout-filter once, small, against the
// worker (BENCH_TEST_WORKER, or built from ../cmd/worker) on the local
// PostgreSQL (BENCH_TEST_DB): every variant delivers every event to every
// endpoint, once, signed.
func TestFanoutFilterSmoke(t *testing.T) {
	_, rep := smoke(t, "-systems", sysWorkerDefaults, "-modes", modeFanoutFilter, "-fanout-filter-events", "30", "-fanout-filter-rounds", "1")
	s := rep.Systems[0]
	for mode, e := range s.Errors {
		t.Errorf("mode %s: %s", mode, e)
	}
	f := s.FanoutFilter
	if f == nil || len(f.Plain) != 1 || len(f.Filtered) != 1 || len(f.Typed) != 1 || f.Ratio <= 0 || f.TypedRatio <= 0 {
		t.Fatalf("fanout-filter: %+v", f)
	}
	for _, d := range slices.Concat(f.Plain, f.Filtered, f.Typed) {
		if d.Deliveries != 30*fanoutFilterWidth || d.Missing != 0 {
			t.Errorf("a run delivered %d of %d: %+v", d.Deliveries, 30*fanoutFilterWidth, d)
		}
	}
	if f.Duplicates+int(f.BadSignatures+f.Misrouted) != 0 {
		t.Errorf("duplicates %d, bad signatures %d, misrouted %d", f.Duplicates, f.BadSignatures, f.Misrouted)
	}
}
