package outbox

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fluxora/webhook-worker/internal/testdb"
)

// storeFunctions are the functions of migrations 022, 024, 028 and 030 the statements call.
// Each must be inlined by the planner: a call left in the plan is a
// function scan or a call per row that no index serves.
var storeFunctions = []string{"webhook_endpoint_name", "webhook_endpoint_shown", "webhook_outbox_pending_rows", "webhook_fan_out_in_flight",
	"webhook_subscribed", "webhook_takes", "webhook_queues", "webhook_flow_room", "webhook_flow_key", "webhook_flow_tokens"}

// calledThrough are storeFunctions the statements call only through
// another: webhook_takes calls webhook_subscribed (030).
var calledThrough = map[string]string{"webhook_takes": "webhook_subscribed"}

// TestStoreFunctionsAreInlined prepares every statement that calls one of
// storeFunctions, with its parameters' types as PostgreSQL infers them,
// and finds none of them named in its plan.
func TestStoreFunctionsAreInlined(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	checked := map[string]bool{}
	for name, p := range statements {
		calls := false
		for _, f := range storeFunctions {
			if strings.Contains(p.text, f+"(") {
				calls, checked[f] = true, true
				if g := calledThrough[f]; g != "" {
					checked[g] = true
				}
			}
		}
		if !calls {
			continue
		}
		n := mustNamed(p.named())
		if _, err := conn.Exec(ctx, "PREPARE inline_chk AS "+n.sql); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		nulls := strings.TrimSuffix(strings.Repeat("NULL, ", len(n.names)), ", ")
		explain := "EXPLAIN (VERBOSE, COSTS OFF) EXECUTE inline_chk"
		if nulls != "" {
			explain += fmt.Sprintf("(%s)", nulls)
		}
		rows, err := conn.Query(ctx, explain)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		plan := strings.Join(lines, "\n")
		for _, f := range storeFunctions {
			if strings.Contains(plan, f) {
				t.Errorf("%s: %s is not inlined:\n%s", name, f, plan)
			}
		}
		if _, err := conn.Exec(ctx, "DEALLOCATE inline_chk"); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range storeFunctions {
		if !checked[f] {
			t.Errorf("no statement calls %s", f)
		}
	}
}
