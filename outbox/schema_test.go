package outbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fluxora/webhook-worker/internal/testdb"
	schema "github.com/fluxora/webhook-worker/sql"
	"github.com/fluxora/webhook-worker/webhook"
)

const eventTypeRule = "webhook_outbox.event_type: must be 1 to 255 bytes without control characters"

func pgErrDetail(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Detail
	}
	return ""
}

func TestSchemaRefusesBadEvents(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	big := `{"s":"` + strings.Repeat("x", 256<<10) + `"}`
	for _, tc := range []struct{ name, event, payload, constraint, message string }{
		{"payload over 256 KiB", "e", big, "webhook_outbox_payload_max_256kib",
			"webhook_outbox.payload: 262153 bytes of JSON text, over the limit of 262144 (256 KiB)"},
		{"empty event type", "", `{}`, "webhook_outbox_event_type_valid", eventTypeRule},
		{"CR LF in event type", "a\r\nx-evil: 1", `{}`, "webhook_outbox_event_type_valid", eventTypeRule},
		{"event type over 255 bytes", strings.Repeat("e", 256), `{}`, "webhook_outbox_event_type_valid", eventTypeRule},
	} {
		_, err := db.Pool.Exec(ctx, "INSERT INTO webhook_outbox (event_type, payload) VALUES ($1, $2)", tc.event, tc.payload)
		var pgErr *pgconn.PgError
		// A check violation that names the rule, and no DETAIL: a
		// violated CHECK printed the whole row, payload included.
		if !errors.As(err, &pgErr) || pgErr.Code != "23514" || pgErr.ConstraintName != tc.constraint ||
			pgErr.Message != tc.message || pgErr.Detail != "" {
			t.Errorf("%s: want violation of %s (%q), got %v (detail %d bytes)", tc.name, tc.constraint, tc.message, err, len(pgErrDetail(err)))
		}
	}
	// An UPDATE that writes content is checked too.
	db.Insert(t, "e", `{}`)
	_, err := db.Pool.Exec(ctx, "UPDATE webhook_outbox SET event_type = '' WHERE NOT processed")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.ConstraintName != "webhook_outbox_event_type_valid" {
		t.Errorf("UPDATE to an empty event type: %v", err)
	}
	if _, err := db.Pool.Exec(ctx, "DELETE FROM webhook_outbox"); err != nil {
		t.Fatal(err)
	}
	_, err = db.Pool.Exec(ctx, "INSERT INTO webhook_outbox (event_type, payload) VALUES ($1, $2)", "e", `not json`)
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

// The content rules are checked when content is written, not by the
// claim's and the record's updates, which write none: a pending row that
// breaks a rule it predates (written before the rule, or while the check
// was off) is still leased and delivered, and the rest of its claim with
// it. Before, every CHECK ran on every update, so such a row failed every
// claim that reached it, its batch mates included, for as long as it was
// due.
func TestRowsAreNotCheckedAgainWhenLeasedOrRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, db := claimSetup(t, 10, time.Minute)
	db.Insert(t, "ok", `{"n": 1}`)
	for _, q := range []string{
		"ALTER TABLE webhook_outbox_pending DISABLE TRIGGER webhook_content_valid",
		"INSERT INTO webhook_outbox (event_type, payload, headers) VALUES ('old type' || chr(1), '{\"n\": 2}', '{\"Host\": \"x\"}')",
		"ALTER TABLE webhook_outbox_pending ENABLE TRIGGER webhook_content_valid",
	} {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	rows := claim(t, c, 0)
	if len(rows) != 2 {
		t.Fatalf("claimed %d rows, want both", len(rows))
	}
	if w := write(t, c, outcome(rows[0], webhook.Done), outcome(rows[1], webhook.Done)); !w[0] || !w[1] {
		t.Fatalf("written %v, want both", w)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE processed"); n != 2 {
		t.Fatalf("%d rows delivered, want 2", n)
	}
}
