package outbox_test

import (
	"context"
	"regexp"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fluxora/webhook-worker/outbox"
)

// jitAboveCost is PostgreSQL's default jit_above_cost: a plan estimated
// above it is compiled by LLVM on every execution when JIT is on.
const jitAboveCost = 100_000

// Through PgBouncer the worker cannot turn JIT off for its sessions and
// every claim is planned with its parameters (a custom plan). Each of the
// claim's locking scans has a LIMIT the planner cannot read from a custom
// plan's parameters (an endpoint's room, the fan-out's budget), so it took
// each for a tenth of the rows: with a large backlog (a stuck endpoint's
// rows, events and WEBHOOK_URL deliveries) the claim was estimated at
// millions of rows, over jit_above_cost (and its inlining and
// optimizing thresholds), and a short statement spent far longer
// compiling than running: a drain through PgBouncer slowed to a crawl.
// Each locking scan now also stops at @limit, a constant of the custom
// plan, so the estimate stays small whatever the backlog.
func TestClaimCustomPlanStaysUnderTheJITThreshold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, db := setup(t)
	stuck := endpoint(t, db, "stuck", true)
	healthy := endpoint(t, db, "healthy", true)
	// The backlog, in one bulk load: the stuck endpoint's 200,000 rows, the
	// healthy one's 10, then 50,000 events and 50,000 WEBHOOK_URL deliveries.
	// The estimates, not the rows, are under test: they scale with the
	// analyzed row counts, which stay what they were.
	db.Load(t, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id, fanout)
		SELECT 'e', '{}', CASE WHEN g <= 200000 THEN $1::uuid WHEN g <= 200010 THEN $2::uuid END, CASE WHEN g > 250010 THEN 1 END
		FROM generate_series(1, 300010) g`, stuck, healthy)
	exec(t, db, `ANALYZE webhook_outbox`)
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_custom_plan"); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string]pgx.NamedArgs{
		"WEBHOOK_URL and table endpoints": {"env": "true", "env_room": "100", "skip": "'{}'::uuid[]"},
		"table endpoints only":            {"env": "false", "env_room": "0", "skip": "'{}'::uuid[]"},
		"stuck skipped":                   {"env": "true", "env_room": "100", "skip": "'{" + stuck + "}'::uuid[]"},
	} {
		args["limit"], args["lease_ms"], args["room"], args["default_room"] = "100", "30000", "'{}'::jsonb", "25"
		for _, step := range append(outbox.ClaimStatements(), [2]string{"claim_plain", outbox.PlainClaimStatement()}) {
			checkCost(t, conn, name+", "+step[0], step[1], args)
		}
	}
}

// checkCost fails the test when the custom plan of the claim statement
// text with args is estimated at jit_above_cost or more.
func checkCost(t *testing.T, conn *pgxpool.Conn, name, text string, args pgx.NamedArgs) {
	t.Helper()
	ctx := context.Background()
	sql, lits := positional(t, text, args)
	if _, err := conn.Exec(ctx, "PREPARE jit_chk AS "+sql); err != nil {
		t.Fatal(err)
	}
	plan := explain(t, conn, "EXPLAIN EXECUTE jit_chk("+lits+")")
	if _, err := conn.Exec(ctx, "DEALLOCATE jit_chk"); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`cost=[0-9.]+\.\.([0-9.]+)`).FindStringSubmatch(plan)
	if m == nil {
		t.Fatalf("%s: no cost in the plan:\n%s", name, plan)
	}
	if cost, _ := strconv.ParseFloat(m[1], 64); cost >= jitAboveCost {
		t.Errorf("%s: custom plan estimated at %.0f, at or over jit_above_cost %d:\n%s", name, cost, jitAboveCost, plan)
	}
}
