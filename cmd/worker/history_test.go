package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
	"github.com/fluxora/webhook-worker/retention"
)

// `worker migrate` onto history partitions (migration 013) keeps every row
// as it was: the old outbox's pending rows (leased ones too) move to
// webhook_outbox_pending, its processed rows and the attempts stay where
// they are, in the old tables, now legacy partitions (not rewritten), but a
// processed row without a time, which goes as it is to the default
// partition. The id sequences go
// on, the NOTIFY trigger and the grants follow the tables, and the pending
// rows are then delivered.
func TestMigrationToHistoryPartitionsKeepsEveryRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.NewEmpty(t)
	migrateBefore(t, db, "migrations/013_history_partitions.sql")
	role := producerRole(t, db)
	fixture := []string{
		`INSERT INTO webhook_outbox (event_type, payload, processed, processed_at, created_at)
		 SELECT 'old', jsonb_build_object('i', g), true, now() - g * interval '1 hour', now() - g * interval '1 hour'
		 FROM generate_series(1, 300) g`,
		`INSERT INTO webhook_outbox (event_type, payload, processed) VALUES ('untimed', '{}', true)`,
		`INSERT INTO webhook_outbox (event_type, payload) SELECT 'e', jsonb_build_object('i', g) FROM generate_series(1, 20) g`,
		`UPDATE webhook_outbox SET locked_until = now() - interval '1 second', lease_token = gen_random_uuid()
		 WHERE id IN (SELECT id FROM webhook_outbox WHERE NOT processed ORDER BY id LIMIT 5)`,
		`INSERT INTO webhook_attempts (delivery_id, attempt, started_at, duration_ms, status)
		 SELECT gen_random_uuid(), 1, now() - g * interval '1 hour', 1, 200 FROM generate_series(1, 200) g`,
		"GRANT SELECT, INSERT ON webhook_outbox TO " + role,
	}
	for _, q := range fixture {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	// The columns as they were: later migrations add others.
	var outboxCols, attemptCols string
	if err := db.Pool.QueryRow(ctx, `SELECT
		(SELECT string_agg(quote_ident(attname), ',' ORDER BY attnum) FROM pg_attribute WHERE attrelid = 'webhook_outbox'::regclass AND attnum > 0 AND NOT attisdropped),
		(SELECT string_agg(quote_ident(attname), ',' ORDER BY attnum) FROM pg_attribute WHERE attrelid = 'webhook_attempts'::regclass AND attnum > 0 AND NOT attisdropped)`).
		Scan(&outboxCols, &attemptCols); err != nil {
		t.Fatal(err)
	}
	rowsSum := `SELECT md5(string_agg((` + outboxCols + `)::text, ',' ORDER BY id)) FROM webhook_outbox o`
	attemptsSum := `SELECT md5(string_agg((` + attemptCols + `)::text, ',' ORDER BY id)) FROM webhook_attempts a`
	var rowsBefore, attemptsBefore string
	var table, file, maxID int64
	if err := db.Pool.QueryRow(ctx, rowsSum).Scan(&rowsBefore); err != nil {
		t.Fatal(err)
	}
	if err := db.Pool.QueryRow(ctx, attemptsSum).Scan(&attemptsBefore); err != nil {
		t.Fatal(err)
	}
	if err := db.Pool.QueryRow(ctx, `SELECT c.oid::bigint, c.relfilenode::bigint, (SELECT max(id) FROM webhook_outbox) FROM pg_class c
		WHERE c.relname = 'webhook_outbox'`).Scan(&table, &file, &maxID); err != nil {
		t.Fatal(err)
	}

	if code, out, errs := ops(t, db, "migrate"); code != 0 {
		t.Fatalf("migrate: exit %d: %s %s", code, out, errs)
	}

	var rowsAfter, attemptsAfter string
	if err := db.Pool.QueryRow(ctx, rowsSum).Scan(&rowsAfter); err != nil {
		t.Fatal(err)
	}
	if err := db.Pool.QueryRow(ctx, attemptsSum).Scan(&attemptsAfter); err != nil {
		t.Fatal(err)
	}
	if rowsAfter != rowsBefore || attemptsAfter != attemptsBefore {
		t.Fatal("rows changed in the migration")
	}
	checks := []struct {
		what  string
		query string
		want  int
	}{
		{"pending rows in webhook_outbox_pending", `SELECT count(*) FROM webhook_outbox_pending WHERE event_type = 'e'`, 20},
		{"processed rows in the legacy partition", `SELECT count(*) FROM webhook_outbox_history_legacy`, 300},
		{"the untimed row, as it was, in the default partition", `SELECT count(*) FROM webhook_outbox_history_default WHERE event_type = 'untimed' AND processed_at IS NULL`, 1},
		{"attempts in their legacy partition", `SELECT count(*) FROM webhook_attempts_legacy`, 200},
		{"the old table not rewritten", `SELECT count(*) FROM pg_class WHERE oid = ` + strconv.FormatInt(table, 10) + ` AND relfilenode = ` + strconv.FormatInt(file, 10) +
			` AND relname = 'webhook_outbox_history_legacy'`, 1},
		{"the trigger on the new table", `SELECT count(*) FROM pg_trigger WHERE tgrelid = 'webhook_outbox'::regclass AND tgname = 'webhook_outbox_notify'`, 1},
		{"the producer's grant", `SELECT count(*) FROM (SELECT 1 WHERE has_table_privilege('` + role + `', 'webhook_outbox', 'INSERT')) x`, 1},
		{"the id sequence goes on", `WITH n AS (INSERT INTO webhook_outbox (event_type, payload) VALUES ('after', '{}') RETURNING id)
			SELECT count(*) FROM n WHERE id > ` + strconv.FormatInt(maxID, 10), 1},
	}
	for _, c := range checks {
		if got := db.Count(t, c.query); got != c.want {
			t.Errorf("%s: %d, want %d", c.what, got, c.want)
		}
	}
	c := newConsumer(t, nil)
	startInProcess(t, baseEnv(db, c, nil))
	waitProcessed(t, db, 301+21, 30*time.Second)
	if got := len(c.byID()); got != 21 {
		t.Fatalf("the new worker delivered %d events, want the 21 pending", got)
	}
}

// producerRole creates a role of its own for the test, dropped with
// whatever was granted to it in db.
func producerRole(t *testing.T, db *testdb.DB) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	role := "fluxora_test_producer_" + hex.EncodeToString(b)
	if _, err := db.Pool.Exec(context.Background(), "CREATE ROLE "+role+" NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if _, err := db.Pool.Exec(ctx, "DROP OWNED BY "+role); err != nil {
			t.Errorf("drop what %s was granted: %v", role, err)
		}
		if _, err := db.Pool.Exec(ctx, "DROP ROLE "+role); err != nil {
			t.Errorf("drop %s: %v", role, err)
		}
	})
	return role
}

// The worker makes its history partitions before it claims: every
// delivered row and its attempt land in a time partition of the worker's
// (none left in a default partition), and the pending partition is left
// empty. On a loaded machine the partitions' locks may not be had in time
// at the start; the rows then go to the default partitions and retention's
// next round (RetryAfter) moves them, which the wait allows for.
func TestDeliveredRowsLeaveThePendingPartition(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	c := newConsumer(t, nil)
	startInProcess(t, baseEnv(db, c, nil))
	const n = 30
	for i := range n {
		db.Insert(t, "e", fmt.Sprintf(`{"i": %d}`, i))
	}
	waitProcessed(t, db, n, 20*time.Second)
	checks := []struct {
		what, query string
		want        int
	}{
		{"rows in time partitions", `SELECT count(*) FROM webhook_outbox WHERE tableoid::regclass::text LIKE 'webhook\_outbox\_history\_p%'`, n},
		{"attempts in time partitions", `SELECT count(*) FROM webhook_attempts WHERE tableoid::regclass::text LIKE 'webhook\_attempts\_p%'`, n},
		{"rows left in webhook_outbox_pending", `SELECT count(*) FROM webhook_outbox_pending`, 0},
	}
	for _, c := range checks {
		waitfor.True(t, retention.RetryAfter+15*time.Second, c.what, func() bool { return db.Count(t, c.query) == c.want })
	}
}
