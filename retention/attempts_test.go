package retention_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/retention"
)

// The attempt history is pruned by the same retention: old attempts go in
// batches, recent ones stay.
func TestRunOncePrunesAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	_, err := db.Pool.Exec(ctx, `INSERT INTO webhook_attempts (delivery_id, attempt, started_at, duration_ms, status)
		SELECT gen_random_uuid(), 1, now() - interval '30 days', 12.5, 200 FROM generate_series(1, 2500)`)
	if err == nil {
		_, err = db.Pool.Exec(ctx, `INSERT INTO webhook_attempts (delivery_id, attempt, started_at, duration_ms, status, error_class, error)
			SELECT gen_random_uuid(), 2, now() - interval '1 hour', 3, 503, 'retryable', 'http 503' FROM generate_series(1, 4)`)
	}
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	d, err := retention.New(retention.Config{Pool: db.Pool, Retention: 7 * 24 * time.Hour, BatchSize: 1000, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if left := db.Count(t, "SELECT count(*) FROM webhook_attempts"); left != 4 {
		t.Fatalf("%d attempts left, want the 4 recent ones", left)
	}
	n, err := testutil.GatherAndCount(reg, "fluxora_webhook_retention_deleted_attempts_total")
	if err != nil || n != 1 {
		t.Fatalf("metric: %d series, %v", n, err)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "fluxora_webhook_retention_deleted_attempts_total" && mf.GetMetric()[0].GetCounter().GetValue() != 2500 {
			t.Fatalf("counted %v deleted attempts, want 2500", mf.GetMetric()[0].GetCounter().GetValue())
		}
	}
}
