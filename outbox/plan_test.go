package outbox_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/outbox"
)

// positional rewrites a statement with named parameters as PostgreSQL's
// PREPARE takes it, and lists its arguments in their order, as SQL
// literals.
func positional(t *testing.T, sql string, args pgx.NamedArgs) (string, string) {
	t.Helper()
	out, values, err := args.RewriteQuery(context.Background(), nil, sql, nil)
	if err != nil {
		t.Fatal(err)
	}
	lits := make([]string, len(values))
	for i, v := range values {
		lits[i] = fmt.Sprint(v)
	}
	return out, strings.Join(lits, ", ")
}

// The claim and the record keep to their indexes, with custom and generic
// plans alike (as the worker's driver prepares them), over a table with a
// backlog and processed rows, and never read the history partitions: the
// generic plan takes LIMIT for a tenth of the backlog.
func TestClaimAndRecordUseIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	_, err := db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload, processed, processed_at, created_at)
		SELECT 'e', '{}', true, now(), now() - g * interval '1 second' FROM generate_series(1, 20000) g`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload) SELECT 'e', '{}' FROM generate_series(1, 20000)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, "ANALYZE webhook_outbox"); err != nil {
		t.Fatal(err)
	}
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	const zero = "00000000-0000-0000-0000-000000000000"
	claimArgs := pgx.NamedArgs{"limit": "100", "lease_ms": "30000", "skip": "'{}'::uuid[]",
		"room": "'{}'::jsonb", "default_room": "25", "env_room": "100", "env": "true"}
	// The indexes each step of the claim must use.
	claimIndexes := map[string][]string{
		"claim_queues":  {"webhook_outbox_queue_idx", "webhook_outbox_env_idx"},
		"claim_events":  {"webhook_outbox_events_idx"},
		"claim_fan_out": {"webhook_outbox_pkey"},
		"claim_plain":   {"webhook_outbox_queue_idx", "webhook_outbox_env_idx", "webhook_outbox_events_idx"},
	}
	claimStatements := append(outbox.ClaimStatements(), [2]string{"claim_plain", outbox.PlainClaimStatement()})
	var claimLits []string
	for i, step := range claimStatements {
		sql, lits := positional(t, step[1], claimArgs)
		if _, err := conn.Exec(ctx, fmt.Sprintf("PREPARE claim_chk%d AS %s", i, sql)); err != nil {
			t.Fatalf("%v\n%s", err, sql)
		}
		claimLits = append(claimLits, lits)
	}
	// A batch of 100 outcomes that end their rows, as the worker writes
	// them in a drain.
	arr := func(v, typ string) string {
		return "'{" + strings.TrimSuffix(strings.Repeat(v+",", 100), ",") + "}'::" + typ + "[]"
	}
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = strconv.Itoa(i + 1)
	}
	recordSQL, recordArgs := positional(t, outbox.RecordSQL, pgx.NamedArgs{
		"ids": "'{" + strings.Join(ids, ",") + "}'::bigint[]", "tokens": arr(zero, "uuid"), "kinds": arr("done", "text"),
		"attempts": arr("1", "int"), "delays_ms": arr("0", "bigint"), "statuses": arr("200", "int"), "errors": arr(`""`, "text"),
		"healths": arr("healthy", "text"), "started": arr("NULL", "timestamptz"), "took_ms": arr("1", "float8"),
		"try_classes": arr(`""`, "text"), "try_errors": arr(`""`, "text"), "marks": arr("true", "boolean"),
		"own": "'{" + strings.Join(ids, ",") + "}'::bigint[]", "console_url": "''"})
	// The same batch as outcomes of fan-outs in flight (migration 018):
	// ten events' deliveries, without rows of their own.
	events := make([]string, 100)
	for i := range events {
		events[i] = strconv.Itoa(i/10 + 1)
	}
	lazySQL, lazyArgs := positional(t, outbox.RecordFanSQL, pgx.NamedArgs{
		"ids": "'{" + strings.Join(ids, ",") + "}'::bigint[]", "tokens": arr(zero, "uuid"), "kinds": arr("done", "text"),
		"attempts": arr("1", "int"), "delays_ms": arr("0", "bigint"), "statuses": arr("200", "int"), "errors": arr(`""`, "text"),
		"healths": arr("healthy", "text"), "started": arr("NULL", "timestamptz"), "took_ms": arr("1", "float8"),
		"try_classes": arr(`""`, "text"), "try_errors": arr(`""`, "text"), "marks": arr("true", "boolean"),
		"event_of": "'{" + strings.Join(events, ",") + "}'::bigint[]", "endpoint_of": arr(zero, "text"),
		"events": "'{1,2,3,4,5,6,7,8,9,10}'::bigint[]", "own": "'{}'::bigint[]", "console_url": "''"})
	for _, q := range []string{"PREPARE record_chk AS " + recordSQL, "PREPARE lazy_chk AS " + lazySQL} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		for i, step := range claimStatements {
			plan := explain(t, conn, fmt.Sprintf("EXPLAIN EXECUTE claim_chk%d(%s)", i, claimLits[i]))
			for _, idx := range claimIndexes[step[0]] {
				if !strings.Contains(plan, idx) {
					t.Errorf("%s: %s does not use %s:\n%s", mode, step[0], idx, plan)
				}
			}
			if strings.Contains(plan, "Seq Scan on webhook_outbox") || strings.Contains(plan, "on webhook_outbox_history") {
				t.Errorf("%s: %s reads the whole table or the history:\n%s", mode, step[0], plan)
			}
		}
		lazy := explain(t, conn, "EXPLAIN EXECUTE lazy_chk("+lazyArgs+")")
		if held, _, ok := strings.Cut(after(lazy, "CTE held"), "CTE lz"); !ok || !strings.Contains(held, "webhook_outbox_pkey") ||
			strings.Contains(lazy, "Seq Scan on webhook_outbox") || strings.Contains(lazy, "Scan on webhook_outbox_history") {
			t.Errorf("%s: record plan of fan-outs in flight:\n%s", mode, lazy)
		}
		rec := explain(t, conn, "EXPLAIN EXECUTE record_chk("+recordArgs+")")
		if strings.Contains(rec, "Seq Scan on webhook_outbox") || strings.Contains(rec, "Scan on webhook_outbox_history") {
			t.Errorf("%s: record plan:\n%s", mode, rec)
		}
		// The outcomes that end their rows are joined with their rows by
		// hash or in order, not compared with every row (a nested loop
		// over a materialized scan grows with outcomes × rows and
		// dominates the statement in a busy batch).
		if marked, _, ok := strings.Cut(after(rec, "CTE marked"), "CTE tried"); !ok || strings.Contains(marked, "Nested Loop") ||
			!strings.Contains(marked, "Hash Join") && !strings.Contains(marked, "Merge Join") {
			t.Errorf("%s: record's marked rows not joined by hash or merge:\n%s", mode, rec)
		}
	}
	if _, err := conn.Exec(ctx, "RESET plan_cache_mode; DEALLOCATE ALL"); err != nil {
		t.Fatal(err)
	}
}

// after is what s holds after the first sep ("" without one).
func after(s, sep string) string {
	_, rest, _ := strings.Cut(s, sep)
	return rest
}

func explain(t *testing.T, conn *pgxpool.Conn, sql string) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	var plan strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan.String()
}
