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
	if _, err := retention.New(retention.Config{Pool: db.Pool, Retention: -time.Second, Registerer: prometheus.NewRegistry()}); err == nil || !strings.Contains(err.Error(), "Retention") {
		t.Fatalf("negative retention accepted: %v", err)
	}
}

// A round drops the partitions past the retention whole (counted), keeps
// the others, and with Retention 0 only prepares partitions.
func TestRunOnceDropsPartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	for _, q := range []string{
		`SELECT webhook_history_prepare('webhook_outbox_history', interval '1 day', now() - interval '10 days', now() - interval '10 days' + interval '1 second')`,
		`INSERT INTO webhook_outbox (event_type, payload, processed, processed_at) SELECT 'old', '{}', true, now() - interval '10 days' FROM generate_series(1, 500)`,
	} {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	keep, err := retention.New(retention.Config{Pool: db.Pool, Retention: 0, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if n, skipped, err := keep.RunOnce(ctx); n != 0 || skipped || err != nil {
		t.Fatalf("kept forever: %d %v %v", n, skipped, err)
	}
	if left := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE event_type = 'old'"); left != 500 {
		t.Fatalf("kept forever: %d rows left of 500", left)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_partition_bounds('webhook_outbox_history') WHERE lo <= now() AND now() < hi`); n != 1 {
		t.Fatalf("kept forever: %d partitions cover now, want 1", n)
	}
	reg = prometheus.NewRegistry()
	d, err := retention.New(retention.Config{Pool: db.Pool, Retention: 7 * 24 * time.Hour, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if n, skipped, err := d.RunOnce(ctx); n != 0 || skipped || err != nil {
		t.Fatalf("round: %d deleted one by one, %v %v; want none", n, skipped, err)
	}
	if left := db.Count(t, "SELECT count(*) FROM webhook_outbox WHERE event_type = 'old'"); left != 0 {
		t.Fatalf("%d rows left of the dropped partition", left)
	}
	if got := counter(t, reg, "fluxora_webhook_retention_dropped_partitions_total"); got != 1 {
		t.Fatalf("dropped partitions counted %v, want 1", got)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_partition_bounds('webhook_outbox_history') WHERE lo <= now() AND now() < hi`); n != 1 {
		t.Fatalf("%d partitions cover now, want 1", n)
	}
}

// counter reads a counter's value from reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}
