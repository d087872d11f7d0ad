package retention_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/retention"
)

// A round removes the ordering lanes untouched for the retention that
// have nothing pending (counted), and keeps the busy and the recent ones;
// with Retention 0 (history kept for ever) it keeps them all.
func TestRunOncePrunesIdleLanes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	for _, q := range []string{
		`INSERT INTO webhook_outbox (event_type, payload, ordering_key) VALUES ('e', '{}', 'busy')`,
		`INSERT INTO webhook_outbox (event_type, payload, ordering_key, fanout) VALUES ('e', '{}', 'busy', 1)`,
		`INSERT INTO webhook_ordering_lanes (endpoint_id, ordering_key, last_seq, touched_at)
		 SELECT webhook_ordering_nil(), 'idle-' || g, g, now() - interval '30 days' FROM generate_series(1, 2500) g`,
		`INSERT INTO webhook_ordering_lanes (endpoint_id, ordering_key, last_seq) VALUES (webhook_ordering_nil(), 'recent', 3)`,
		`UPDATE webhook_ordering_lanes SET touched_at = now() - interval '30 days' WHERE ordering_key = 'busy'`,
	} {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	keep, err := retention.New(retention.Config{Pool: db.Pool, Retention: 0, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := keep.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_ordering_lanes`); n != 2502 {
		t.Fatalf("history kept for ever: %d lanes left of 2502", n)
	}
	reg := prometheus.NewRegistry()
	d, err := retention.New(retention.Config{Pool: db.Pool, Retention: 7 * 24 * time.Hour, BatchSize: 1000, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_ordering_lanes WHERE ordering_key IN ('busy', 'recent')`); n != 2 {
		t.Fatalf("%d of the busy and the recent lane left, want both", n)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_ordering_lanes`); n != 2 {
		t.Fatalf("%d lanes left, want 2", n)
	}
	if got := counter(t, reg, "fluxora_webhook_retention_pruned_lanes_total"); got != 2500 {
		t.Fatalf("pruned lanes counted %v, want 2500", got)
	}
	// The floors keep the largest sequence of the lanes removed.
	if n := db.Count(t, `SELECT max(last_seq) FROM webhook_ordering_floors WHERE endpoint_id = webhook_ordering_nil()`); n != 2500 {
		t.Fatalf("the floors' largest sequence is %d, want 2500", n)
	}
}
