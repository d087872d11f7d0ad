package main

import (
	"context"
	"log/slog"
	"testing"

	"github.com/fluxora/webhook-worker/internal/testdb"
)

// On a direct connection the worker's sessions plan once (generic plans),
// commit without waiting for the WAL flush, and never JIT-compile: the
// claim's generic plan is estimated over jit_above_cost on a large table,
// and compiling it would cost every claim far more than running it.
func TestDirectSessionsTurnJITOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	cfg := config{DatabaseURL: db.URL, ListenURL: db.URL}
	pool, path, err := openWorkerPool(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if path != directPath {
		t.Fatalf("path %s, want direct", path)
	}
	var jit, plan, commit string
	if err := pool.QueryRow(ctx, "SELECT current_setting('jit'), current_setting('plan_cache_mode'), current_setting('synchronous_commit')").Scan(&jit, &plan, &commit); err != nil {
		t.Fatal(err)
	}
	if jit != "off" || plan != "force_generic_plan" || commit != "off" {
		t.Fatalf("jit %s, plan_cache_mode %s, synchronous_commit %s; want off, force_generic_plan, off", jit, plan, commit)
	}
}
