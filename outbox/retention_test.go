package outbox_test

import (
	"context"
	"testing"
	"time"
)

// A retention batch deletes at most its size of the rows older than the
// retention, only under its advisory lock: with the lock held by another
// session it deletes nothing and says so. Pending rows and recent ones
// stay.
func TestRetentionBatches(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	ctx := context.Background()
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload, processed, processed_at, created_at)
		SELECT 'e', '{}', true, now() - interval '30 days', now() - interval '30 days' FROM generate_series(1, 5)`)
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload, processed, processed_at) VALUES ('e', '{}', true, now() - interval '1 hour')`)
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload, created_at) VALUES ('e', '{}', now() - interval '60 days')`)
	exec(t, db, `INSERT INTO webhook_attempts (delivery_id, attempt, started_at, duration_ms, status)
		SELECT gen_random_uuid(), 1, now() - CASE WHEN g <= 3 THEN interval '30 days' ELSE interval '1 hour' END, 1, 200
		FROM generate_series(1, 4) g`)
	const key, week = int64(42), 7 * 24 * time.Hour
	for _, step := range []struct {
		name  string
		del   func(context.Context, time.Duration, int, int64) (int64, bool, error)
		table string
		old   int64
		left  int64
	}{
		{"processed", s.DeleteProcessedBefore, "webhook_outbox", 5, 2},
		{"attempts", s.DeleteAttemptsBefore, "webhook_attempts", 3, 1},
	} {
		other, err := db.Pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
			t.Fatal(err)
		}
		if n, got, err := step.del(ctx, week, 2, key); n != 0 || got || err != nil {
			t.Fatalf("%s, the lock held elsewhere: %d %v %v; want nothing, not got", step.name, n, got, err)
		}
		if _, err := other.Exec(ctx, "SELECT pg_advisory_unlock($1)", key); err != nil {
			t.Fatal(err)
		}
		other.Release()
		var total int64
		for range 3 {
			n, got, err := step.del(ctx, week, 2, key)
			if err != nil || !got || n > 2 {
				t.Fatalf("%s: %d %v %v; want at most a batch of 2, got", step.name, n, got, err)
			}
			total += n
		}
		if left := db.Count(t, "SELECT count(*) FROM "+step.table); total != step.old || int64(left) != step.left {
			t.Fatalf("%s: deleted %d, %d left; want %d deleted, %d left", step.name, total, left, step.old, step.left)
		}
	}
}
