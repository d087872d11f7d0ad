package main

import (
	"bytes"
	"cmp"
	"os"
	"strings"
	"testing"
)

// TestPgBouncerSmoke runs the latency and drain modes once through a
// private PgBouncer in transaction mode (-pgbouncer), with tiny counts.
func TestPgBouncerSmoke(t *testing.T) {
	opt, err := parseFlags([]string{"-pgbouncer", "-systems", sysWorkerDefaults, "-events", "20", "-backlog", "300",
		"-producers", "2", "-worker", os.Getenv("BENCH_TEST_WORKER")}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(opt.modes, ",") != "latency,drain" {
		t.Fatalf("-pgbouncer modes %v, want latency,drain", opt.modes)
	}
	opt.db = cmp.Or(os.Getenv("BENCH_TEST_DB"), opt.db)
	var log bytes.Buffer
	rep, err := benchmark(t.Context(), opt, &log)
	if err != nil {
		t.Fatalf("benchmark: %v\n%s", err, log.String())
	}
	s := rep.Systems[0]
	for mode, e := range s.Errors {
		t.Errorf("mode %s: %s", mode, e)
	}
	if !strings.Contains(s.Settings, "through PgBouncer") {
		t.Errorf("settings %q do not say PgBouncer", s.Settings)
	}
	if s.Latency == nil || s.Latency.Missing != 0 || s.Latency.Latency.N != 20 {
		t.Errorf("latency: %+v", s.Latency)
	}
	if s.Drain == nil || s.Drain.Missing != 0 || s.Drain.PerSecond <= 0 {
		t.Errorf("drain: %+v", s.Drain)
	}
	if rep.BadSignatures != 0 || s.Duplicates != 0 {
		t.Errorf("bad signatures %d, duplicates %d", rep.BadSignatures, s.Duplicates)
	}
}

func TestPgBouncerFlagLimits(t *testing.T) {
	for _, args := range [][]string{{"-pgbouncer", "-modes", "burst"}, {"-pgbouncer", "-systems", sysRiverTuned}} {
		if _, err := parseFlags(args, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "-pgbouncer") {
			t.Errorf("%v: %v, want a -pgbouncer error", args, err)
		}
	}
}
