package schema_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	schema "github.com/fluxora/webhook-worker/sql"

	"github.com/fluxora/webhook-worker/internal/testdb"
)

// A worker of the older release, restarted while a rolling upgrade runs,
// finds the newer release's trigger script in place: it starts, since the
// database holds a migration it does not know (a newer release migrated
// it). Without such a migration a trigger other than its own is outdated,
// and a migration it knows that is missing always is.
func TestCheckAcceptsANewerReleasesTrigger(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := t.Context()
	exec := func(sql string) {
		t.Helper()
		if _, err := db.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	if err := schema.Check(ctx, db.Pool); err != nil {
		t.Fatalf("freshly migrated: %v", err)
	}
	exec(`UPDATE webhook_schema_migrations SET checksum = 'a newer text' WHERE version = 'triggers/notify.sql'`)
	if err := schema.Check(ctx, db.Pool); !errors.Is(err, schema.ErrNotMigrated) {
		t.Fatalf("another trigger text and no newer migration: %v, want ErrNotMigrated", err)
	}
	exec(`INSERT INTO webhook_schema_migrations (version, checksum) VALUES ('migrations/999_newer_release.sql', 'x')`)
	if err := schema.Check(ctx, db.Pool); err != nil {
		t.Fatalf("a newer release's trigger: %v, want the older worker to start", err)
	}
	exec(`DELETE FROM webhook_schema_migrations WHERE version = 'migrations/021_internal_bounds.sql'`)
	if err := schema.Check(ctx, db.Pool); !errors.Is(err, schema.ErrNotMigrated) {
		t.Fatalf("a migration of its own missing: %v, want ErrNotMigrated", err)
	}
}

// worker migrate replaces a changed trigger script while producers insert:
// no insert fails (the script's DROP TRIGGER once locked the partitions
// before the table, the reverse of an insert's order, and deadlocked with
// one), and the trigger is in place after each round.
func TestTriggerReplacedBesideProducers(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var inserted atomic.Int64
	errs := make(chan error, 8)
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				_, err := db.Pool.Exec(ctx, `INSERT INTO webhook_outbox (event_type, payload) VALUES ('t', '{}')`)
				if err != nil && ctx.Err() == nil {
					errs <- err
					return
				}
				inserted.Add(1)
			}
		})
	}
	for round := range 15 {
		if _, err := db.Pool.Exec(t.Context(), `UPDATE webhook_schema_migrations SET checksum = 'old' WHERE version = 'triggers/notify.sql'`); err != nil {
			t.Fatal(err)
		}
		did, err := schema.Migrate(t.Context(), db.Pool)
		if err != nil || len(did) != 1 || did[0] != "triggers/notify.sql" {
			t.Fatalf("round %d: migrate applied %v, %v; want the trigger alone", round, did, err)
		}
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a producer's insert failed while the trigger was replaced: %v", err)
	}
	if inserted.Load() == 0 {
		t.Fatal("no producer inserted anything")
	}
	if err := schema.Check(t.Context(), db.Pool); err != nil {
		t.Fatal(err)
	}
}
