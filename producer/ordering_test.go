package producer_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/producer"
)

// The ordering key is set by the kit (to every endpoint or to one), by
// webhook_enqueue(…, ordering_key => …) and by a plain INSERT; a bad key is
// refused before any round trip by the kit and by the database otherwise,
// each naming the rule.
func TestOrderingKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_endpoints (name, url, secret) VALUES ('shop', 'https://h.example.com/', 'whsec_x')`); err != nil {
		t.Fatal(err)
	}
	if _, err := producer.Enqueue(ctx, db.Pool, "order.paid", []byte(`{}`), producer.WithOrderingKey("order-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := producer.Enqueue(ctx, db.Pool, "order.paid", []byte(`{}`), producer.WithOrderingKey("order-1"), producer.ToEndpoint("shop")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `SELECT webhook_enqueue('order.paid', '{}', ordering_key => 'order-1')`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload, ordering_key) VALUES ('order.paid', '{}', 'order-1')`); err != nil {
		t.Fatal(err)
	}
	if _, err := producer.Enqueue(ctx, db.Pool, "order.paid", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE ordering_key = 'order-1'"); n != 4 {
		t.Fatalf("%d rows with the key, want 4", n)
	}
	if n := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE ordering_key = 'order-1' AND endpoint_id IS NOT NULL AND ordering_seq = 1"); n != 1 {
		t.Fatalf("the targeted row: %d rows first of their lane, want 1", n)
	}

	for _, key := range []string{"", "a\r\nx-evil: 1", strings.Repeat("k", 256), "bad\xffutf8"} {
		if _, err := producer.Enqueue(ctx, db.Pool, "order.paid", []byte(`{}`), producer.WithOrderingKey(key)); !errors.Is(err, producer.ErrOrderingKeyInvalid) {
			t.Errorf("WithOrderingKey(%.20q): %v, want ErrOrderingKeyInvalid", key, err)
		}
	}
	_, err := db.Pool.Exec(ctx, `SELECT webhook_enqueue('order.paid', '{}', ordering_key => $1)`, "a\nb")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "22023" || !strings.Contains(pgErr.Message, "ordering_key must be 1 to 255 bytes") {
		t.Errorf("webhook_enqueue with a bad key: %v", err)
	}
	_, err = db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload, ordering_key) VALUES ('order.paid', '{}', '')`)
	if !errors.As(err, &pgErr) || pgErr.ConstraintName != "webhook_outbox_ordering_key_valid" {
		t.Errorf("INSERT with an empty key: %v, want the check webhook_outbox_ordering_key_valid", err)
	}
}

// A keyed row needs READ COMMITTED: another isolation level is refused
// with an error that names it; a row without a key is not affected.
func TestOrderingKeyNeedsReadCommitted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	if _, err := db.Pool.Exec(ctx, `INSERT INTO webhook_endpoints (name, url, secret) VALUES ('shop', 'https://hooks.example.com/', 'whsec_x')`); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := producer.Enqueue(ctx, tx, "order.paid", []byte(`{}`)); err != nil {
		t.Fatalf("a row without a key under REPEATABLE READ: %v", err)
	}
	_, err = producer.Enqueue(ctx, tx, "order.paid", []byte(`{}`), producer.WithOrderingKey("order-1"), producer.ToEndpoint("shop"))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "0A000" || !strings.Contains(pgErr.Message, "READ COMMITTED") ||
		!strings.Contains(pgErr.Message, "REPEATABLE READ") {
		t.Fatalf("a keyed row under REPEATABLE READ: %v", err)
	}
}
