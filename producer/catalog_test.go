package producer_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/producer"
)

// catalogDB is a database whose catalog lists invoice.paid (with a
// schema) and note (without), strict.
func catalogDB(t *testing.T) *testdb.DB {
	t.Helper()
	db := testdb.New(t)
	if _, err := db.Pool.Exec(context.Background(), `INSERT INTO webhook_event_types (name, schema) VALUES
		('invoice.paid', '{"type": "object", "required": ["amount"], "properties": {"amount": {"type": "integer"}}}'),
		('note', NULL);
		UPDATE webhook_event_catalog SET strict = true`); err != nil {
		t.Fatal(err)
	}
	return db
}

// WithCatalog refuses, before the round trip (the transaction stays
// usable), a payload that does not match its type's schema and a type the
// strict catalog does not list, naming the rule and never the payload's
// value; a matching payload, a type without a schema and the worker's own
// types are inserted. With pgx and with database/sql.
func TestEnqueueWithCatalog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := catalogDB(t)
	cat, err := producer.LoadCatalog(ctx, db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if !cat.Strict() {
		t.Fatal("the catalog's strict mode was not read")
	}
	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		_, err := producer.Enqueue(ctx, tx, "invoice.paid", []byte(`{"amount": "SECRET-12"}`), producer.WithCatalog(cat))
		if !errors.Is(err, producer.ErrPayloadInvalid) || strings.Contains(err.Error(), "SECRET") ||
			err.Error() != "producer: invalid payload: payload does not match the schema of invoice.paid: /amount: got string, want integer" {
			t.Errorf("a payload that does not match: %v", err)
		}
		_, err = producer.Enqueue(ctx, tx, "invoice.payed", []byte(`{}`), producer.WithCatalog(cat))
		if !errors.Is(err, producer.ErrUnknownEventType) || err.Error() != "producer: unknown event type invoice.payed: the event catalog is strict" {
			t.Errorf("an unknown type: %v", err)
		}
		for typ, payload := range map[string]string{"invoice.paid": `{"amount": 5}`, "note": `[1]`, "fluxora.mine": `{}`} {
			if _, err := producer.Enqueue(ctx, tx, typ, []byte(payload), producer.WithCatalog(cat)); err != nil {
				return err // the transaction was usable after the refusals
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox"); n != 3 {
		t.Fatalf("%d rows, want 3", n)
	}

	sqlDB, err := sql.Open("pgx", db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer sqlDB.Close()
	cat, err = producer.LoadCatalogSQL(ctx, sqlDB)
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Check("invoice.paid", []byte(`{}`)); !errors.Is(err, producer.ErrPayloadInvalid) {
		t.Fatalf("database/sql's catalog: %v", err)
	}
}

// Without WithCatalog the database refuses an unknown type of a strict
// catalog, and the kit returns the same error as its own check.
func TestEnqueueUnknownTypeRefusedByTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := catalogDB(t)
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		_, err := producer.Enqueue(ctx, tx, "invoice.payed", []byte(`{}`))
		return err
	})
	if !errors.Is(err, producer.ErrUnknownEventType) || err.Error() != "producer: unknown event type invoice.payed: the event catalog is strict" {
		t.Fatalf("pgx: %v", err)
	}
	sqlDB, err := sql.Open("pgx", db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer sqlDB.Close()
	tx, err := sqlDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := producer.EnqueueSQL(ctx, tx, "invoice.payed", []byte(`{}`)); !errors.Is(err, producer.ErrUnknownEventType) {
		t.Fatalf("database/sql: %v", err)
	}
}
