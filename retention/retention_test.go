package retention_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/retention"
)

func TestRunOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	// Months of traffic: 20,000 old processed rows, 5 recent processed, 3 pending (one old).
	_, err := db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload, processed, processed_at, created_at)
		SELECT 'e', '{}', true, now() - interval '30 days', now() - interval '30 days' FROM generate_series(1, 20000)`)
	if err == nil {
		_, err = db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload, processed, processed_at)
			SELECT 'e', '{}', true, now() - interval '1 hour' FROM generate_series(1, 5)`)
	}
	if err == nil {
		_, err = db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload, created_at) VALUES ('e', '{}', now() - interval '60 days')`)
	}
	if err != nil {
		t.Fatal(err)
	}
	db.Insert(t, "e", `{}`, `{}`)
	d, err := retention.New(retention.Config{Pool: db.Pool, Retention: 7 * 24 * time.Hour, BatchSize: 3000, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}

	// Another worker holds the lock: this round skips.
	other, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(0x666c75786f7262)); err != nil {
		t.Fatal(err)
	}
	if n, skipped, err := d.RunOnce(ctx); n != 0 || !skipped || err != nil {
		t.Fatalf("with the lock held elsewhere: %d %v %v", n, skipped, err)
	}
	_, _ = other.Exec(ctx, "SELECT pg_advisory_unlock($1)", int64(0x666c75786f7262))
	other.Release()

	n, skipped, err := d.RunOnce(ctx)
	if err != nil || skipped || n != 20000 {
		t.Fatalf("deleted %d (skipped %v, err %v), want 20000 in batches", n, skipped, err)
	}
	if left := db.Count(t, "SELECT count(*) FROM webhook_outbox"); left != 8 {
		t.Fatalf("%d rows left, want 5 recent + 3 pending", left)
	}
	if _, err := retention.New(retention.Config{Pool: db.Pool, Registerer: prometheus.NewRegistry()}); err == nil || !strings.Contains(err.Error(), "Retention") {
		t.Fatalf("zero retention accepted: %v", err)
	}
}
