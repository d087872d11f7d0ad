package claimer_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

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
