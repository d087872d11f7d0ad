package claimer_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fluxora/webhook-worker/claimer"
	"github.com/fluxora/webhook-worker/internal/testdb"
	schema "github.com/fluxora/webhook-worker/sql"
)

func TestSchemaRefusesBadEvents(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	big := `{"s":"` + strings.Repeat("x", 256<<10) + `"}`
	for _, tc := range []struct{ name, event, payload, constraint string }{
		{"payload over 256 KiB", "e", big, "webhook_outbox_payload_max_256kib"},
		{"empty event type", "", `{}`, "webhook_outbox_event_type_valid"},
		{"CR LF in event type", "a\r\nx-evil: 1", `{}`, "webhook_outbox_event_type_valid"},
		{"event type over 255 bytes", strings.Repeat("e", 256), `{}`, "webhook_outbox_event_type_valid"},
	} {
		_, err := db.Pool.Exec(ctx, "INSERT INTO webhook_outbox (event_type, payload) VALUES ($1, $2)", tc.event, tc.payload)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.ConstraintName != tc.constraint {
			t.Errorf("%s: want violation of %s, got %v", tc.name, tc.constraint, err)
		}
	}
	_, err := db.Pool.Exec(ctx, "INSERT INTO webhook_outbox (event_type, payload) VALUES ($1, $2)", "e", `not json`)
	if err == nil {
		t.Error("non-JSON payload accepted")
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox"); n != 0 {
		t.Fatalf("%d bad rows stored", n)
	}
}

func TestMigrateIsIdempotentAndCheckable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.NewEmpty(t)
	if err := schema.Check(ctx, db.Pool); !errors.Is(err, schema.ErrNotMigrated) || !strings.Contains(err.Error(), "worker migrate") {
		t.Fatalf("unmigrated: got %v", err)
	}
	applied, err := schema.Migrate(ctx, db.Pool)
	if err != nil || len(applied) < 2 {
		t.Fatalf("first migrate applied %v, %v", applied, err)
	}
	if applied, err := schema.Migrate(ctx, db.Pool); err != nil || len(applied) != 0 {
		t.Fatalf("second migrate applied %v, %v", applied, err)
	}
	if err := schema.Check(ctx, db.Pool); err != nil {
		t.Fatalf("migrated: %v", err)
	}
	// An outdated trigger is reported and re-applied.
	if _, err := db.Pool.Exec(ctx, "UPDATE webhook_schema_migrations SET checksum = 'old' WHERE version LIKE 'triggers/%'"); err != nil {
		t.Fatal(err)
	}
	if err := schema.Check(ctx, db.Pool); !errors.Is(err, schema.ErrNotMigrated) {
		t.Fatalf("outdated trigger: got %v", err)
	}
	if applied, err := schema.Migrate(ctx, db.Pool); err != nil || len(applied) != 1 {
		t.Fatalf("re-apply trigger: %v %v", applied, err)
	}
}

// The claim and the record use indexes whatever the history, also in the
// generic plan a prepared statement settles on after five executions: a
// sequential scan there would make every claim cost as much as the whole
// table, processed rows included.
func TestClaimAndRecordUseIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	// Processed rows and a backlog of pending ones: the generic plan takes
	// LIMIT $1 for a tenth of the backlog.
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
	// PREPARE and EXPLAIN EXECUTE, as the worker's driver prepares them; a
	// plain EXPLAIN with parameters is always planned for their values.
	const zero = "00000000-0000-0000-0000-000000000000"
	for _, q := range []string{
		"PREPARE claim_chk(int, bigint, uuid[], boolean, boolean) AS " + claimer.ClaimSQL,
		"PREPARE record_chk AS " + claimer.RecordSQL,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		claim := explain(t, conn, "EXPLAIN EXECUTE claim_chk(100, 30000, '{}', false, true)")
		if !strings.Contains(claim, "webhook_outbox_pending_idx") || strings.Contains(claim, "Seq Scan on webhook_outbox") {
			t.Errorf("%s: claim plan:\n%s", mode, claim)
		}
		rec := explain(t, conn, "EXPLAIN EXECUTE record_chk('{1,2}', '{"+zero+","+zero+"}', '{1,5}', '{0,0}', '{0,0}', '{0,0}', '{\"\",\"\"}', '{0,0}', '{NULL,NULL}', '{0,0}', '{\"\",\"\"}', '{\"\",\"\"}')")
		if strings.Contains(rec, "Seq Scan on webhook_outbox") {
			t.Errorf("%s: record plan:\n%s", mode, rec)
		}
	}
	if _, err := conn.Exec(ctx, "RESET plan_cache_mode; DEALLOCATE ALL"); err != nil {
		t.Fatal(err)
	}
}

func explain(t *testing.T, conn *pgxpool.Conn, sql string, args ...any) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), sql, args...)
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
