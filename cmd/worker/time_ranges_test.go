package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// badTimes are the times the worker cannot handle: infinite,
// past the year 9999, BC, before 1970.
var badTimes = []string{"-infinity", "infinity", "294276-12-31", "0044-03-15 BC", "1969-12-31 23:59:59+00"}

// The schema refuses every time out of range, on each column a producer or
// operator can write, with a message naming the column and the range.
func TestSchemaRefusesTimesOutOfRange(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	var dead, endpoint string
	if err := db.Pool.QueryRow(ctx, `INSERT INTO webhook_dead_letter (delivery_id, event_type, payload, attempts, last_error)
		VALUES (gen_random_uuid(), 'e', '{}', 1, 'x') RETURNING id::text`).Scan(&dead); err != nil {
		t.Fatal(err)
	}
	if err := db.Pool.QueryRow(ctx, `INSERT INTO webhook_endpoints (name, url, secret) VALUES ('e1', 'https://127.0.0.1/', 's') RETURNING id::text`).Scan(&endpoint); err != nil {
		t.Fatal(err)
	}
	id := db.Insert(t, "e", `{}`)[0]
	// A processed row's lease: a pending row's is bounded closer still
	// (migration 021's webhook_outbox_lease_bound, internal_bounds_test.go).
	done := db.Insert(t, "e", `{}`)[0]
	if _, err := db.Pool.Exec(ctx, `UPDATE webhook_outbox SET processed = true, processed_at = now() WHERE id = $1`, done); err != nil {
		t.Fatal(err)
	}
	writes := map[string]string{
		"webhook_outbox.created_at":               `INSERT INTO webhook_outbox (event_type, payload, created_at) VALUES ('e', '{}', $1::timestamptz)`,
		"webhook_outbox.locked_until":             `UPDATE webhook_outbox SET locked_until = $1::timestamptz WHERE id = ` + strconv.FormatInt(done, 10),
		"webhook_outbox.processed_at":             `UPDATE webhook_outbox SET processed_at = $1::timestamptz WHERE id = ` + strconv.FormatInt(id, 10),
		"webhook_dead_letter.died_at":             `UPDATE webhook_dead_letter SET died_at = $1::timestamptz WHERE id = ` + dead,
		"webhook_attempts.started_at":             `INSERT INTO webhook_attempts (delivery_id, attempt, started_at, duration_ms) VALUES (gen_random_uuid(), 1, $1::timestamptz, 1)`,
		"webhook_endpoints.failing_since":         `UPDATE webhook_endpoints SET failing_since = $1::timestamptz WHERE id = '` + endpoint + `'`,
		"webhook_endpoints.secret_previous_until": `UPDATE webhook_endpoints SET secret_previous = 'p', secret_previous_until = $1::timestamptz WHERE id = '` + endpoint + `'`,
	}
	for col, sql := range writes {
		for _, ts := range badTimes {
			_, err := db.Pool.Exec(ctx, sql, ts)
			if err == nil || !strings.Contains(err.Error(), col+": ") || !strings.Contains(err.Error(), "a time must be finite, from 1970-01-01 to 9999-12-31 (UTC)") {
				t.Errorf("%s = %s: want the range error naming the column, got %v", col, ts, err)
			}
		}
		// The ends of the range are accepted.
		for _, ts := range []string{"1970-01-01 00:00:00+00", "9999-12-31 23:59:59.999999+00"} {
			if _, err := db.Pool.Exec(ctx, sql, ts); err != nil {
				t.Errorf("%s = %s: %v", col, ts, err)
			}
		}
	}
	// Every constraint is validated (010).
	if n := db.Count(t, `SELECT count(*) FROM pg_constraint WHERE conname LIKE 'webhook\_%\_range' AND convalidated AND NOT conrelid IN (SELECT inhrelid FROM pg_inherits)`); n != 11 {
		t.Fatalf("%d validated time constraints, want 11", n)
	}
}

// Rows out of range already in the table when 009 arrives: pending ones are
// moved to the dead letter with a reason (an event not yet fanned out is
// fanned out again by its replay), history is clamped into the range,
// nothing is deleted silently, and the constraints end validated.
func TestMigrationDealsWithTimesOutOfRange(t *testing.T) {
	t.Parallel()
	db := testdb.NewEmpty(t)
	migrateBefore(t, db, "migrations/009")
	ctx := context.Background()
	for _, ts := range badTimes {
		if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload, created_at) VALUES ('bad', '{"k": 1}', $1::timestamptz)`, ts); err != nil {
			t.Fatal(err)
		}
	}
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO webhook_endpoints (name, url, secret, failing_since) VALUES ('e1', 'https://127.0.0.1/', 's', '-infinity');
		INSERT INTO webhook_outbox (event_type, payload, locked_until, endpoint_id, fanout) SELECT 'stuck', '{}', 'infinity', id, NULL FROM webhook_endpoints;
		INSERT INTO webhook_outbox (event_type, payload) VALUES ('fine', '{}');
		INSERT INTO webhook_outbox (event_type, payload, created_at, processed, processed_at) VALUES ('history', '{}', '-infinity', true, 'infinity');
		INSERT INTO webhook_dead_letter (delivery_id, event_type, payload, attempts, last_error, died_at) VALUES (gen_random_uuid(), 'old', '{}', 1, 'x', '294276-01-01');
		INSERT INTO webhook_attempts (delivery_id, attempt, started_at, duration_ms) VALUES (gen_random_uuid(), 1, '0001-01-01 BC', 1)`)
	if err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := ops(t, db, "migrate"); code != 0 || !strings.Contains(out, "010_time_ranges_validate") {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, errOut)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_dead_letter WHERE last_error LIKE 'migration 009: created_at % is out of range%' AND event_type = 'bad' AND fan_out AND endpoint_id IS NULL`); n != len(badTimes) {
		t.Fatalf("%d bad events in the dead letter with their reason, want %d", n, len(badTimes))
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_dead_letter WHERE last_error LIKE 'migration 009: locked_until infinity%' AND event_type = 'stuck' AND NOT fan_out AND endpoint_id IS NOT NULL`); n != 1 {
		t.Fatalf("the row leased until infinity is not in the dead letter for its endpoint (%d)", n)
	}
	checks := map[string]int{
		`SELECT count(*) FROM webhook_outbox WHERE event_type IN ('bad', 'stuck')`:                                                                          0,
		`SELECT count(*) FROM webhook_outbox WHERE event_type = 'fine' AND NOT processed`:                                                                   1,
		`SELECT count(*) FROM webhook_outbox WHERE event_type = 'history' AND created_at = '1970-01-01 00:00:00+00' AND processed_at > '9999-12-31'`:        1,
		`SELECT count(*) FROM webhook_dead_letter WHERE event_type = 'old' AND died_at > '9999-12-31'`:                                                      1,
		`SELECT count(*) FROM webhook_attempts WHERE started_at = '1970-01-01 00:00:00+00'`:                                                                 1,
		`SELECT count(*) FROM webhook_endpoints WHERE failing_since = '1970-01-01 00:00:00+00'`:                                                             1,
		`SELECT count(*) FROM pg_constraint WHERE conname LIKE 'webhook\_%\_range' AND convalidated AND NOT conrelid IN (SELECT inhrelid FROM pg_inherits)`: 11,
	}
	for q, want := range checks {
		if n := db.Count(t, q); n != want {
			t.Errorf("%s: %d, want %d", q, n, want)
		}
	}
	// Replay: the event that died before its fan-out is a new event again
	// (fanout NULL), due now.
	if code, out, errOut := ops(t, db, "dlq", "replay", "--all", "--event", "bad"); code != 0 {
		t.Fatalf("replay: exit %d\n%s%s", code, out, errOut)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_outbox WHERE event_type = 'bad' AND NOT processed AND fanout IS NULL AND endpoint_id IS NULL AND created_at <= now()`); n != len(badTimes) {
		t.Fatalf("%d replayed bad events pending as new events, want %d", n, len(badTimes))
	}
}

// A row the worker cannot decode goes to the dead letter alone: its batch
// mates are delivered, and every CLI read works with such rows present.
func TestRowsOutOfRangeStallNothing(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	db.DropTimeRanges(t)
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `
		INSERT INTO webhook_endpoints (name, url, secret, failing_since, last_error_at) VALUES ('e1', 'https://127.0.0.1:1/', 's', '-infinity', 'infinity');
		INSERT INTO webhook_dead_letter (delivery_id, event_type, payload, attempts, last_error, died_at)
		  VALUES ('`+idA+`', 'old', '{}', 1, 'x', 'infinity'), ('`+idB+`', 'old', '{}', 1, 'x', '294276-01-01'), ('`+idC+`', 'old', '{}', 1, 'x', '0001-01-01 BC');
		INSERT INTO webhook_attempts (delivery_id, attempt, started_at, duration_ms) VALUES ('`+idA+`', 1, '-infinity', 1), ('`+idA+`', 2, '294276-01-01', 1);
		INSERT INTO webhook_outbox (event_type, payload, created_at, processed, processed_at) VALUES ('history', '{}', '-infinity', true, 'infinity')`)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		if i%6 == 0 {
			if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload, created_at) VALUES ('bad', '{}', $1::timestamptz)`, badTimes[i/6]); err != nil {
				t.Fatal(err)
			}
		}
		db.Insert(t, "ok", `{"i": 1}`)
	}
	// e1 is subscribed to nothing it can reach: only the WEBHOOK_URL
	// endpoint receives, the 30 ordinary events.
	if _, err := db.Pool.Exec(ctx, `UPDATE webhook_endpoints SET event_types = '{none}'`); err != nil {
		t.Fatal(err)
	}
	c := newConsumer(t, nil)
	startInProcess(t, baseEnv(db, c, map[string]string{"WEBHOOK_BATCH_SIZE": "10"}))
	waitfor.True(t, 30*time.Second, "the 30 ordinary events delivered", func() bool { return len(c.byID()) >= 30 })
	// The due bad rows (-infinity, BC, 1969) end in the dead letter, each
	// with its reason; the ones due after the year 9999 wait.
	waitfor.True(t, 30*time.Second, "the due bad rows dead-lettered", func() bool {
		return db.Count(t, `SELECT count(*) FROM webhook_dead_letter WHERE event_type = 'bad' AND last_error LIKE 'the worker cannot handle this row: created_at %'`) == 3
	})
	for _, d := range c.deliveries() {
		if d.Event != "ok" {
			t.Fatalf("a bad row was sent: %+v", d)
		}
	}
	deliveredOnceEach(t, c, 30)
	for _, args := range [][]string{
		{"status"}, {"status", "--json"}, {"status", "--endpoint", "e1"}, {"dlq", "list"}, {"dlq", "list", "--json"},
		{"attempts", idA}, {"attempts", idA, "--json"}, {"endpoints", "list"}, {"endpoints", "list", "--json"},
	} {
		if code, out, errOut := ops(t, db, args...); code != 0 {
			t.Errorf("worker %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}
}
