package docsnippets

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/producer"
)

// The Go snippets of docs/producers.md, as they stand there
// (TestProducerDocSnippetsAreRun checks it), run on a migrated database.

type Invoice struct {
	ID     int64 `json:"id"`
	Amount int64 `json:"amount"`
}

type Order struct {
	ID string `json:"id"`
}

// --- docs/producers.md: "The Go kit" ---

func markPaid(ctx context.Context, pool *pgxpool.Pool, inv Invoice) (deliveryID string, err error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback(ctx) // a no-op after Commit
	if _, err := tx.Exec(ctx, "UPDATE invoices SET status = 'paid' WHERE id = $1", inv.ID); err != nil {
		return "", err
	}
	id, err := producer.EnqueueJSON(ctx, tx, "invoice.paid", inv) // the consumer's delivery id
	if err != nil {
		return "", err
	}
	return id, tx.Commit(ctx)
}

// --- docs/producers.md: "Per-event headers" ---

func withHeaders(ctx context.Context, tx pgx.Tx, inv Invoice, tp, cid string) (string, error) {
	id, err := producer.EnqueueJSON(ctx, tx, "invoice.paid", inv,
		producer.WithHeaders(map[string]string{"traceparent": tp, "x-correlation-id": cid}))
	return id, err
}

// --- docs/producers.md: "Ordering keys" ---

func withKey(ctx context.Context, tx pgx.Tx, order Order) (string, error) {
	id, err := producer.EnqueueJSON(ctx, tx, "order.paid", order, producer.WithOrderingKey("order-"+order.ID))
	return id, err
}

func TestProducerSnippets(t *testing.T) {
	ctx := context.Background()
	db := testdb.New(t)
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE invoices (id bigint PRIMARY KEY, status text NOT NULL);
		INSERT INTO invoices VALUES (42, 'open')`); err != nil {
		t.Fatal(err)
	}
	id, err := markPaid(ctx, db.Pool, Invoice{ID: 42, Amount: 10})
	if err != nil {
		t.Fatal(err)
	}
	var status, payload string
	if err := db.Pool.QueryRow(ctx, `SELECT i.status, o.payload::text FROM invoices i, webhook_outbox o
		WHERE i.id = 42 AND o.delivery_id = $1`, id).Scan(&status, &payload); err != nil {
		t.Fatal(err)
	}
	if status != "paid" || payload != `{"id": 42, "amount": 10}` {
		t.Fatalf("status %q, payload %s", status, payload)
	}

	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	hid, err := withHeaders(ctx, tx, Invoice{ID: 43}, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "c-43")
	if err != nil {
		t.Fatal(err)
	}
	kid, err := withKey(ctx, tx, Order{ID: "42"})
	if err != nil {
		t.Fatal(err)
	}
	var headers, key string
	if err := tx.QueryRow(ctx, `SELECT (SELECT headers::text FROM webhook_outbox WHERE delivery_id = $1),
		(SELECT ordering_key FROM webhook_outbox WHERE delivery_id = $2)`, hid, kid).Scan(&headers, &key); err != nil {
		t.Fatal(err)
	}
	if headers != `{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "x-correlation-id": "c-43"}` || key != "order-42" {
		t.Fatalf("headers %s, key %q", headers, key)
	}
}

// TestProducerDocSnippetsAreRun fails when a Go block of docs/producers.md
// is not, line for line (leading blanks aside), code of this file.
func TestProducerDocSnippetsAreRun(t *testing.T) {
	checkBlocks(t, "../../docs/producers.md", "producers_test.go", 3)
}
