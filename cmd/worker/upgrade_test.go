package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	schema "github.com/fluxora/webhook-worker/sql"
)

// migrateBefore applies the schema as the release before version had it:
// every migration and trigger but version and the ones after it.
func migrateBefore(t *testing.T, db *testdb.DB, version string) {
	t.Helper()
	ctx := context.Background()
	files, err := schema.Files()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE webhook_schema_migrations (version text PRIMARY KEY, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !f.Trigger && f.Version >= version {
			continue
		}
		sql := f.SQL
		if f.Trigger && version <= "migrations/003_leases.sql" {
			// The trigger as it was before leases: no locked_until yet.
			sql = strings.Replace(sql, " AND NEW.locked_until IS NULL", "", 1)
		}
		if _, err := db.Pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", f.Version, err)
		}
		if _, err := db.Pool.Exec(ctx, "INSERT INTO webhook_schema_migrations (version, checksum) VALUES ($1, $2)", f.Version, f.Checksum); err != nil {
			t.Fatal(err)
		}
	}
}

// `worker migrate` upgrades a running deployment to leases: while a worker
// of the previous release holds a claim transaction open across its
// requests, the migration neither blocks producers for long (it gives up
// its lock wait after 200 ms and tries again) nor rewrites the table, and it
// completes once that transaction ends; every pending row is then delivered
// by the new worker.
func TestMigrateUpgradesARunningDeployment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.NewEmpty(t)
	migrateBefore(t, db, "migrations/003_leases.sql")
	insertTx(t, db, 10)
	// The table by its oid: migration 013 renames it (it becomes a history
	// partition) and must not rewrite it either.
	var table, fileBefore uint32
	if err := db.Pool.QueryRow(ctx, "SELECT oid, relfilenode FROM pg_class WHERE relname = 'webhook_outbox'").Scan(&table, &fileBefore); err != nil {
		t.Fatal(err)
	}
	// A worker of the previous release: its claim transaction stays open
	// while its requests are in flight.
	old, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Rollback(ctx) //nolint:errcheck
	if _, err := old.Exec(ctx, `SELECT id FROM webhook_outbox WHERE processed = false AND created_at <= now()
		ORDER BY created_at, id LIMIT 2 FOR UPDATE SKIP LOCKED`); err != nil {
		t.Fatal(err)
	}

	migrated := make(chan string, 1)
	go func() {
		code, out, errs := ops(t, db, "migrate")
		if code != 0 {
			out += " exit " + errs
		}
		migrated <- out
	}()
	// Producers go on while the migration waits for its lock.
	for i := range 5 {
		insertTx(t, db, 1)
		select {
		case out := <-migrated:
			t.Fatalf("migrate finished while the old claim transaction was open (insert %d): %s", i, out)
		default:
		}
	}
	// The old worker records its outcome and commits; the migration follows.
	if _, err := old.Exec(ctx, `UPDATE webhook_outbox SET processed = true, processed_at = now() WHERE id IN (1, 2)`); err != nil {
		t.Fatal(err)
	}
	if err := old.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case out := <-migrated:
		if !strings.Contains(out, "applied migrations/003_leases.sql") {
			t.Fatalf("migrate: %s", out)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("migrate did not finish after the old transaction ended")
	}
	var fileAfter uint32
	if err := db.Pool.QueryRow(ctx, "SELECT relfilenode FROM pg_class WHERE oid = $1", table).Scan(&fileAfter); err != nil {
		t.Fatal(err)
	}
	if fileAfter != fileBefore {
		t.Fatal("the migration rewrote webhook_outbox")
	}
	c := newConsumer(t, nil)
	startInProcess(t, baseEnv(db, c, nil))
	waitProcessed(t, db, 15, 20*time.Second)
	if got := len(c.byID()); got != 13 {
		t.Fatalf("the new worker delivered %d events, want the 13 left pending", got)
	}
}
