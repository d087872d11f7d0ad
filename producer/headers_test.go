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

// WithHeaders stores the headers with the event, with pgx and database/sql,
// targeted or not; merged when given twice.
func TestEnqueueWithHeaders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_endpoints (name, url, secret) VALUES ('tenant-42', 'https://hooks.example.com/', 'whsec_x')`); err != nil {
		t.Fatal(err)
	}
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var ids []string
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		id, err := producer.EnqueueJSON(ctx, tx, "invoice.paid", map[string]int{"n": 1},
			producer.WithHeaders(map[string]string{"traceparent": tp}), producer.WithHeaders(map[string]string{"X-Correlation-Id": "c-1"}))
		ids = append(ids, id)
		if err != nil {
			return err
		}
		id, err = producer.Enqueue(ctx, tx, "invoice.paid", []byte(`{}`), producer.ToEndpoint("tenant-42"),
			producer.WithHeaders(map[string]string{"traceparent": tp, "X-Correlation-Id": "c-2"}))
		ids = append(ids, id)
		return err
	})
	if err != nil {
		t.Fatal(err)
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
	id, err := producer.EnqueueSQL(ctx, tx, "invoice.paid", []byte(`{}`), producer.WithHeaders(map[string]string{"traceparent": tp, "X-Correlation-Id": "c-3"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	ids = append(ids, id)
	for i, id := range ids {
		want := []string{"c-1", "c-2", "c-3"}[i]
		if n := db.Count(t, `SELECT count(*) FROM webhook_outbox WHERE delivery_id = $1 AND headers = jsonb_build_object('traceparent', $2::text, 'X-Correlation-Id', $3::text)`,
			id, tp, want); n != 1 {
			t.Errorf("event %d: headers not stored as given", i)
		}
	}
	if _, err := producer.Enqueue(ctx, db.Pool, "e", []byte(`{}`), producer.WithHeaders(nil)); err != nil {
		t.Fatal(err)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE headers IS NULL"); n != 1 {
		t.Fatalf("%d rows without headers, want 1 (WithHeaders(nil) is none)", n)
	}
}

// Headers the rules refuse are refused before the round trip, naming the
// header: the caller's transaction stays usable. Should the database refuse
// headers the kit let through (a database with stricter rules), the error is
// ErrHeadersInvalid with the database's reason.
func TestEnqueueRefusesBadHeaders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	for _, tc := range []struct {
		h    map[string]string
		want string
	}{
		{map[string]string{"X-Fluxora-Event": "forged"}, `"X-Fluxora-Event" may not be set: x-fluxora-* headers are the worker's`},
		{map[string]string{"webhook-id": "x"}, `"webhook-id" may not be set`},
		{map[string]string{"Content-Type": "text/plain"}, `"Content-Type" may not be set`},
		{map[string]string{"Connection": "close"}, `"Connection" may not be set: it is a hop-by-hop header`},
		{map[string]string{"bad name": "x"}, `"bad name": a header name must be an HTTP token`},
		{map[string]string{"traceparent": "a\r\nb"}, `"traceparent": the value must be a string without CR, LF or control characters`},
		{map[string]string{"x-bin": "\xff"}, `"x-bin": the value must be a string`},
		{map[string]string{"x-a": "1", "X-A": "2"}, `"X-A" and "x-a" are the same header`},
		{map[string]string{"x": strings.Repeat("v", 8192)}, "at most 8 KiB (names and values), got 8193 bytes"},
	} {
		_, err := producer.Enqueue(ctx, tx, "e", []byte(`{}`), producer.WithHeaders(tc.h))
		if !errors.Is(err, producer.ErrHeadersInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want ErrHeadersInvalid with %q", tc.h, err, tc.want)
		}
	}
	if _, err := producer.Enqueue(ctx, tx, "e", []byte(`{}`)); err != nil {
		t.Fatalf("the transaction is no longer usable: %v", err)
	}

	// A database whose rules are stricter than the kit's.
	if _, err := db.Pool.Exec(ctx, `CREATE OR REPLACE FUNCTION webhook_headers_problem(h jsonb) RETURNS text
		LANGUAGE sql IMMUTABLE AS $$ SELECT CASE WHEN h ? 'x-stricter' THEN '"x-stricter": refused by this database' END $$`); err != nil {
		t.Fatal(err)
	}
	_, err = producer.Enqueue(ctx, db.Pool, "e", []byte(`{}`), producer.WithHeaders(map[string]string{"x-stricter": "1"}))
	if !errors.Is(err, producer.ErrHeadersInvalid) || err.Error() != `producer: invalid headers: "x-stricter": refused by this database` {
		t.Fatalf("refused by the database: %v", err)
	}
	// The same through database/sql (pgx's driver).
	sqlDB, err := sql.Open("pgx", db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer sqlDB.Close()
	stx, err := sqlDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stx.Rollback()
	_, err = producer.EnqueueSQL(ctx, stx, "e", []byte(`{}`), producer.WithHeaders(map[string]string{"x-stricter": "1"}))
	if !errors.Is(err, producer.ErrHeadersInvalid) || err.Error() != `producer: invalid headers: "x-stricter": refused by this database` {
		t.Fatalf("refused by the database through database/sql: %v", err)
	}
	// Another refusal of the same SQLSTATE is not the headers'. (The
	// transactions end first: ALTER TABLE waits for their locks.)
	_ = stx.Rollback()
	_ = tx.Rollback(ctx)
	if _, err := db.Pool.Exec(ctx, `ALTER TABLE webhook_outbox_pending ADD CONSTRAINT test_no_forbidden CHECK (event_type <> 'forbidden')`); err != nil {
		t.Fatal(err)
	}
	_, err = producer.Enqueue(ctx, db.Pool, "forbidden", []byte(`{}`), producer.WithHeaders(map[string]string{"x-ok": "1"}))
	if err == nil || errors.Is(err, producer.ErrHeadersInvalid) || !strings.Contains(err.Error(), "test_no_forbidden") {
		t.Fatalf("another check violation: %v, want it as the database said it, not ErrHeadersInvalid", err)
	}
}
