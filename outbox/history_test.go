package outbox_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxora/webhook-worker/internal/testdb"
	"github.com/fluxora/webhook-worker/internal/waitfor"
)

// History lives in time partitions: PrepareHistory makes them (again
// making nothing, and a different width only filling gaps), a processed
// row moves out of webhook_outbox_pending into its time partition in the
// statement that marks it, and DropHistoryBefore drops a partition only
// when its newest possible row is past the retention, pending rows and
// recent history untouched.
func TestHistoryPartitions(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	ctx := context.Background()
	// The hour before now to two hours after: 3 or 4 hourly slots each.
	made, err := s.PrepareHistory(ctx, time.Hour, 2*time.Hour)
	if err != nil || made < 2*3 || made != partitions(t, db) {
		t.Fatalf("prepare: %d, %v; want every partition there is (%d), at least 3 of each history", made, err, partitions(t, db))
	}
	before := partitions(t, db)
	if made, err := s.PrepareHistory(ctx, time.Hour, 2*time.Hour); err != nil || made != partitions(t, db)-before || made > 2 {
		t.Fatalf("prepare again: %d, %v; want nothing made (but a slot when an hour turned meanwhile)", made, err)
	}
	// A worker with daily partitions beside: it fills only what the hourly
	// ones leave of its days.
	if _, err := s.PrepareHistory(ctx, 24*time.Hour, 48*time.Hour); err != nil {
		t.Fatalf("prepare daily beside hourly: %v", err)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_partition_bounds('webhook_outbox_history') a
		JOIN webhook_partition_bounds('webhook_outbox_history') b ON a.part <> b.part AND a.lo < b.hi AND b.lo < a.hi`); n != 0 {
		t.Fatalf("%d overlapping partitions", n)
	}
	// Ten days ago, by hand, as a worker running then would have made.
	exec(t, db, `SELECT webhook_history_prepare('webhook_outbox_history', interval '1 day', now() - interval '10 days', now() - interval '10 days' + interval '1 second')`)
	exec(t, db, `SELECT webhook_history_prepare('webhook_attempts', interval '1 day', now() - interval '10 days', now() - interval '10 days' + interval '1 second')`)

	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload) SELECT 'now', '{}' FROM generate_series(1, 3)`)
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload, processed, processed_at) VALUES ('old', '{}', true, now() - interval '10 days')`)
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload) VALUES ('pending', '{}')`)
	exec(t, db, `INSERT INTO webhook_attempts (delivery_id, attempt, started_at, duration_ms) VALUES
		(gen_random_uuid(), 1, now() - interval '10 days', 1), (gen_random_uuid(), 1, now(), 1)`)
	exec(t, db, `UPDATE webhook_outbox SET processed = true, processed_at = now() WHERE event_type = 'now'`)
	where := func(typ string) []string {
		rows, err := db.Pool.Query(ctx, `SELECT DISTINCT tableoid::regclass::text FROM webhook_outbox WHERE event_type = $1`, typ)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			names = append(names, n)
		}
		return names
	}
	if got := where("now"); len(got) != 1 || !strings.HasPrefix(got[0], "webhook_outbox_history_p") {
		t.Fatalf("processed rows are in %v, want one time partition", got)
	}
	if got := where("pending"); !slices.Equal(got, []string{"webhook_outbox_pending"}) {
		t.Fatalf("the pending row is in %v", got)
	}

	dropped, err := s.DropHistoryBefore(ctx, 7*24*time.Hour)
	if err != nil || len(dropped) != 2 {
		t.Fatalf("drop: %v, %v; want the two partitions of ten days ago", dropped, err)
	}
	for _, n := range dropped {
		if !strings.HasPrefix(n, "webhook_outbox_history_p") && !strings.HasPrefix(n, "webhook_attempts_p") {
			t.Fatalf("dropped %s", n)
		}
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_outbox WHERE event_type = 'old'`); n != 0 {
		t.Fatalf("%d rows of ten days ago left", n)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_outbox WHERE event_type IN ('now', 'pending')`) +
		db.Count(t, `SELECT count(*) FROM webhook_attempts WHERE started_at > now() - interval '1 day'`); n != 5 {
		t.Fatalf("%d recent rows left, want 3 processed, 1 pending, 1 attempt", n)
	}
	if again, err := s.DropHistoryBefore(ctx, 7*24*time.Hour); err != nil || len(again) != 0 {
		t.Fatalf("drop again: %v, %v", again, err)
	}
	if _, err := s.PrepareHistory(ctx, 30*time.Second, time.Hour); err == nil || !strings.Contains(err.Error(), "under a minute") {
		t.Fatalf("a width under a minute: %v", err)
	}
}

// A range whose rows already sit in the default partition is left to it
// (the retention's batches delete them): preparing the rest goes on.
func TestHistoryPrepareLeavesTheDefaultsRows(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	ctx := context.Background()
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload, processed, processed_at) VALUES ('e', '{}', true, now())`)
	made, err := s.PrepareHistory(ctx, time.Hour, 2*time.Hour)
	if err != nil || made < 2*3-1 || made != partitions(t, db) {
		t.Fatalf("prepare: %d, %v; want every partition made (%d)", made, err, partitions(t, db))
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_outbox_history_default`); n != 1 {
		t.Fatalf("%d rows in the default partition, want the 1 it had", n)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_partition_bounds('webhook_outbox_history') WHERE lo <= now() AND now() < hi`) +
		db.Count(t, `SELECT count(*) FROM webhook_partition_bounds('webhook_attempts') WHERE lo <= now() AND now() < hi`); n != 1 {
		t.Fatalf("%d partitions cover now, want the attempts' only", n)
	}
}

// partitions counts the time partitions of both histories.
func partitions(t *testing.T, db *testdb.DB) int {
	t.Helper()
	return db.Count(t, `SELECT (SELECT count(*) FROM webhook_partition_bounds('webhook_outbox_history'))
		+ (SELECT count(*) FROM webhook_partition_bounds('webhook_attempts'))`)
}

// Dropping a partition held by a vacuum (here, a session holding the lock
// a vacuum takes) waits for it without holding up the writers of the hot
// path (statements on pending rows: NOT processed): rows are marked
// processed, and so moved to history, meanwhile, and the drop goes through
// once the lock is free.
func TestHistoryDropWaitsForVacuumAlone(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	ctx := context.Background()
	if _, err := s.PrepareHistory(ctx, 24*time.Hour, 48*time.Hour); err != nil {
		t.Fatal(err)
	}
	exec(t, db, `SELECT webhook_history_prepare('webhook_outbox_history', interval '1 day', now() - interval '10 days', now() - interval '10 days' + interval '1 second')`)
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload, processed, processed_at) VALUES ('old', '{}', true, now() - interval '10 days')`)
	exec(t, db, `INSERT INTO webhook_outbox (event_type, payload) SELECT 'new', '{}' FROM generate_series(1, 5)`)
	var old string
	if err := db.Pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM webhook_outbox WHERE event_type = 'old'`).Scan(&old); err != nil {
		t.Fatal(err)
	}
	vacuum, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer vacuum.Rollback(ctx) //nolint:errcheck
	if _, err := vacuum.Exec(ctx, "LOCK TABLE "+old+" IN SHARE UPDATE EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	type result struct {
		names []string
		err   error
	}
	dropped := make(chan result, 1)
	go func() {
		names, err := s.DropHistoryBefore(ctx, 7*24*time.Hour)
		dropped <- result{names, err}
	}()
	waitfor.True(t, 10*time.Second, "the drop waiting for the partition", func() bool {
		return db.Count(t, `SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = $1::regclass`, old) == 1
	})
	writeCtx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	if _, err := db.Pool.Exec(writeCtx, `UPDATE webhook_outbox SET processed = true, processed_at = now() WHERE NOT processed AND event_type = 'new'`); err != nil {
		t.Fatalf("a writer while the drop waits: %v", err)
	}
	if err := vacuum.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-dropped
	if r.err != nil || !slices.Contains(r.names, old) {
		t.Fatalf("drop: %v, %v; want %s dropped", r.names, r.err, old)
	}
	if n := db.Count(t, `SELECT count(*) FROM webhook_outbox WHERE processed AND event_type = 'new'`); n != 5 {
		t.Fatalf("%d rows marked, want 5", n)
	}
}

// A partition detached and not dropped (a worker stopped between the two
// statements) is dropped by the next round, and nothing else is.
func TestHistoryDropsWhatWasLeftDetached(t *testing.T) {
	t.Parallel()
	s, db := setup(t)
	ctx := context.Background()
	if _, err := s.PrepareHistory(ctx, 24*time.Hour, 48*time.Hour); err != nil {
		t.Fatal(err)
	}
	var left string
	if err := db.Pool.QueryRow(ctx, `SELECT part::text FROM webhook_partition_bounds('webhook_attempts') ORDER BY hi DESC LIMIT 1`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	exec(t, db, "ALTER TABLE webhook_attempts DETACH PARTITION "+left)
	exec(t, db, "CREATE TABLE webhook_attempts_pnotours (x int)")
	dropped, err := s.DropHistoryBefore(ctx, 7*24*time.Hour)
	if err != nil || !slices.Equal(dropped, []string{left}) {
		t.Fatalf("drop: %v, %v; want [%s]", dropped, err, left)
	}
	if n := db.Count(t, `SELECT count(*) FROM pg_class WHERE relname = $1`, left) + db.Count(t, `SELECT count(*) FROM pg_class WHERE relname = 'webhook_attempts_pnotours'`); n != 1 {
		t.Fatalf("%d of the left partition and the other table, want the other table alone", n)
	}
}
