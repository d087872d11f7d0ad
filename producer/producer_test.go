package producer_test

import (
	"context"
	"database/sql"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/producer"
)

var (
	_ producer.Querier[pgx.Row] = pgx.Tx(nil)
	_ producer.Querier[pgx.Row] = (*pgx.Conn)(nil)
	_ producer.Querier[pgx.Row] = (*pgxpool.Pool)(nil)
)

// The kit imports no driver: a producer on database/sql with another
// driver does not build pgx, pgxpool and puddle in (go list -deps shows
// what a program importing the kit links); nor the OpenTelemetry SDK (only
// its API, to read the caller's trace).
func TestNoDriverDependency(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	var deps int
	for _, pkg := range strings.Fields(string(out)) {
		deps++
		if strings.HasPrefix(pkg, "github.com/jackc/") || strings.HasPrefix(pkg, "go.opentelemetry.io/otel/sdk") {
			t.Errorf("the producer kit depends on %s", pkg)
		}
	}
	if deps < 10 || !strings.Contains(string(out), "github.com/fluxora/webhook-worker/outbox/insert") {
		t.Fatalf("go list -deps listed %d packages, not the kit's own:\n%s", deps, out)
	}
}

func TestEnqueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)

	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id, err := producer.EnqueueJSON(ctx, tx, "stream.updated", map[string]int{"id": 7})
	if err != nil || len(id) != 36 {
		t.Fatalf("enqueue: %q %v", id, err)
	}
	_ = tx.Rollback(ctx)
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox"); n != 0 {
		t.Fatalf("rolled-back enqueue left %d rows", n)
	}

	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		id, err = producer.Enqueue(ctx, tx, "stream.updated", []byte(`{"id": 8}`))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE delivery_id = $1 AND payload->>'id' = '8'", id); n != 1 {
		t.Fatalf("committed enqueue: %d rows", n)
	}
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id, err = producer.Enqueue(ctx, conn.Conn(), "stream.updated", []byte(`{"id": 9}`))
	conn.Release()
	if err != nil || db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE delivery_id = $1", id) != 1 {
		t.Fatalf("enqueue on a *pgx.Conn: %q %v", id, err)
	}

	for _, tc := range []struct {
		event   string
		payload string
		want    error
	}{
		{"", `{}`, producer.ErrEmptyEventType},
		{"a\r\nx-evil: 1", `{}`, producer.ErrEventTypeInvalid},
		{strings.Repeat("e", 256), `{}`, producer.ErrEventTypeInvalid},
		{"bad\xffutf8", `{}`, producer.ErrEventTypeInvalid},
		{"e", `{"s":"` + strings.Repeat("x", 256<<10) + `"}`, producer.ErrPayloadTooLarge},
		{"e", `{not json`, producer.ErrPayloadNotJSON},
	} {
		if _, err := producer.Enqueue(ctx, db.Pool, tc.event, []byte(tc.payload)); !errors.Is(err, tc.want) {
			t.Errorf("Enqueue(%q, %.20q) = %v, want %v", tc.event, tc.payload, err, tc.want)
		}
	}
}

func TestSQLFunction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	var id string
	if err := db.Pool.QueryRow(ctx, "SELECT webhook_enqueue('invoice.paid', '{\"n\": 1}')::text").Scan(&id); err != nil || len(id) != 36 {
		t.Fatalf("webhook_enqueue: %q %v", id, err)
	}
	for _, tc := range []struct{ event, payload, msg string }{
		{"", `{}`, "event_type must not be empty"},
		{"a\nb", `{}`, "control characters"},
		{"e", `{"s":"` + strings.Repeat("x", 256<<10) + `"}`, "over the 256 KiB limit"},
	} {
		_, err := db.Pool.Exec(ctx, "SELECT webhook_enqueue($1, $2::jsonb)", tc.event, tc.payload)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "22023" || !strings.Contains(pgErr.Message, tc.msg) {
			t.Errorf("webhook_enqueue(%q): %v, want %q", tc.event, err, tc.msg)
		}
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox"); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
}

func TestEnqueueSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	sqlDB, err := sql.Open("pgx", db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer sqlDB.Close()
	tx, err := sqlDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := producer.EnqueueSQL(ctx, tx, "order.created", []byte(`{"order": 9}`))
	if err != nil || len(id) != 36 {
		t.Fatalf("EnqueueSQL: %q %v", id, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE delivery_id = $1", id); n != 1 {
		t.Fatalf("%d rows", n)
	}
	tx, _ = sqlDB.BeginTx(ctx, nil)
	defer tx.Rollback()
	if _, err := producer.EnqueueSQL(ctx, tx, "", []byte(`{}`)); !errors.Is(err, producer.ErrEmptyEventType) {
		t.Fatalf("empty event type: %v", err)
	}
}

// ToEndpoint targets one endpoint by name, with pgx and database/sql; an
// unknown name is an error naming it, and nothing is inserted.
func TestEnqueueToEndpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	var epID string
	if err := db.Pool.QueryRow(ctx, `INSERT INTO webhook_endpoints (name, url, secret) VALUES ('tenant-42', 'https://hooks.example.com/', 'whsec_x') RETURNING id::text`).Scan(&epID); err != nil {
		t.Fatal(err)
	}
	id, err := producer.EnqueueJSON(ctx, db.Pool, "invoice.paid", map[string]int{"n": 1}, producer.ToEndpoint("tenant-42"))
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
	id2, err := producer.EnqueueSQL(ctx, tx, "invoice.paid", []byte(`{}`), producer.ToEndpoint("tenant-42"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE delivery_id = ANY($1::uuid[]) AND endpoint_id = $2", []string{id, id2}, epID); n != 2 {
		t.Fatalf("%d targeted rows, want 2", n)
	}
	_, err = producer.Enqueue(ctx, db.Pool, "invoice.paid", []byte(`{}`), producer.ToEndpoint("nope"))
	if !errors.Is(err, producer.ErrUnknownEndpoint) || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("unknown endpoint: %v", err)
	}
	tx, _ = sqlDB.BeginTx(ctx, nil)
	defer tx.Rollback()
	_, err = producer.EnqueueSQL(ctx, tx, "invoice.paid", []byte(`{}`), producer.ToEndpoint("nope"))
	if !errors.Is(err, producer.ErrUnknownEndpoint) || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("unknown endpoint through database/sql: %v", err)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox"); n != 2 {
		t.Fatalf("%d rows, want 2", n)
	}
	if _, err := db.Pool.Exec(ctx, "SELECT webhook_enqueue('e', '{}', 'nope')"); err == nil || !strings.Contains(err.Error(), `no endpoint named "nope"`) {
		t.Fatalf("webhook_enqueue to an unknown endpoint: %v", err)
	}
}
